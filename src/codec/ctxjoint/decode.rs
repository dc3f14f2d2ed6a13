//! The decoder: each quad's contexts from the quads before the one in between, its keys
//! decoded under them, and for `ctxsigns` its signs beside them.

use super::model::*;
use super::{read_layout, SIGNED};
use crate::codec::signs::SignDecoder;
use crate::codec::{huffjoint, joint};
use crate::entropy::alphabet::Alphabet;
use crate::entropy::rows::Part;
use crate::entropy::streams::{two_streams, Streams};
use crate::error::CodecError;

/// The decoding state of one plane: the models, the scale and the two streams.
struct State<'a> {
    scale: Scale,
    /// The plane's parts, and how many are started.
    parts: Vec<Part>,
    started: usize,
    /// Elements of the current part not yet decoded.
    left: usize,
    models: Models,
    mag: [u64; 256],
    streams: Streams<'a>,
    /// Magnitudes of the last two quads decoded, quad `q`'s at `q % 2`.
    last: [[u64; QUAD]; 2],
    /// Elements of the current part decoded.
    done: usize,
    /// The decoder of plane 1's signs, for the [`SIGNED`] layout (boxed, which keeps the
    /// state that the plain layouts' hot loop reads small).
    signs: Option<Box<SignDecoder<'a>>>,
}

impl State<'_> {
    /// Decodes the next `out.len()` keys into `out`; every call but the plane's last decodes
    /// whole quads. Whole quads past the first two go through [`State::quads`], for the
    /// plane's context spacing; the rest through [`State::quad`].
    fn decode_into(&mut self, out: &mut [u8]) {
        let mut at = 0;
        while at < out.len() {
            if self.left == 0 {
                self.next_part();
            }
            let end = at + self.left.min(out.len() - at);
            let rest = &mut out[at..end];
            let whole = match self.done >= LAG {
                true => rest.len() / QUAD * QUAD,
                false => 0,
            };
            if whole > 0 {
                let quads = &mut rest[..whole];
                match (self.scale.shift == STEP_SHIFT, self.signs.is_some()) {
                    (true, false) => self.quads::<STEP_SHIFT, false>(quads),
                    (false, false) => self.quads::<{ STEP_SHIFT + 1 }, false>(quads),
                    (true, true) => self.quads::<STEP_SHIFT, true>(quads),
                    (false, true) => self.quads::<{ STEP_SHIFT + 1 }, true>(quads),
                }
                at += whole;
                self.left -= whole;
            } else {
                let n = rest.len().min(QUAD);
                self.quad(&mut rest[..n]);
                at += n;
                self.left -= n;
            }
        }
    }

    /// Starts the next part: its rows, nothing seen. Parts cover the plane, so a plane's
    /// elements never run past its last part (a payload whose parts do not is refused).
    fn next_part(&mut self) {
        let part = self.parts[self.started.min(self.parts.len() - 1)];
        self.started += 1;
        self.scale.restart(part.rows);
        if let Some(signs) = &mut self.signs {
            signs.start(part.rows);
        }
        self.left = part.len;
        self.done = 0;
        self.last = [[0; QUAD]; 2];
    }

    /// Decodes whole quads of a plane past its first two, with contexts `1 << SHIFT` units
    /// apart (the plane's [`Scale::shift`]), and with `SIGNS` each quad's signs.
    ///
    /// The hot loop of BEST's decoding. The spacing is a constant and the contexts of a
    /// quad are found before its elements are decoded, so that between two elements only the
    /// two decoders' state and the four tables are live; starting a context (at most
    /// [`CONTEXTS`] times a plane) and a model's events are out of line. The signs' decoding
    /// is a chain of work of its own, which runs in the keys' shadow.
    #[inline(never)]
    fn quads<const SHIFT: u32, const SIGNS: bool>(&mut self, out: &mut [u8]) {
        let data = self.streams.data;
        let mut decs = self.streams.decs;
        let State {
            scale,
            models,
            mag,
            last,
            done,
            signs,
            ..
        } = self;
        let mut signs = signs.as_mut().filter(|_| SIGNS);
        let mut q = *done / QUAD;
        for quad in out.chunks_exact_mut(QUAD) {
            // This quad's magnitudes replace those of quad q - 2, added first.
            let l = &mut last[q % 2];
            let c = scale.next_contexts::<SHIFT>(*l).map(|c| c as usize);
            let [d0, d1] = &mut decs;
            let keys = [
                models.get(c[0]).decode(d0, data),
                models.get(c[1]).decode(d1, data),
                models.get(c[2]).decode(d0, data),
                models.get(c[3]).decode(d1, data),
            ];
            quad.copy_from_slice(&keys);
            *l = keys.map(|k| mag[k as usize]);
            if let Some(s) = &mut signs {
                s.decode::<QUAD>();
            }
            q += 1;
        }
        *done = q * QUAD;
        self.streams.decs = decs;
    }

    /// Decodes one quad of `out.len()` elements: one of the plane's first two quads (nothing
    /// added yet), or its last, partial one.
    fn quad(&mut self, out: &mut [u8]) {
        let data = self.streams.data;
        let [mut d0, mut d1] = self.streams.decs;
        let q = self.done / QUAD;
        self.done += out.len();
        let scale = &mut self.scale;
        let l = &mut self.last[q % 2];
        if q >= 2 {
            scale.add_quad(*l);
        }
        let row = scale.row();
        for (j, (k, l)) in out.iter_mut().zip(l).enumerate() {
            let c = match q {
                0 | 1 => scale.first_context(row, q * QUAD + j),
                _ => scale.context(row, j),
            };
            let t = self.models.get(c);
            *k = match j % 2 {
                0 => t.decode(&mut d0, data),
                _ => t.decode(&mut d1, data),
            };
            *l = self.mag[*k as usize];
        }
        self.streams.decs = [d0, d1];
        if let Some(s) = &mut self.signs {
            s.decode_some(out.len());
        }
    }
}

/// Decodes a payload `payload` of layout `LAYOUT` (see [`ROWS`](super::ROWS)) and its plane-1 payload
/// `plane1` into the exponent plane `exps` and the sign/mantissa plane `mans`.
pub fn decode<const LAYOUT: u8>(
    payload: &[u8],
    plane1: &[u8],
    exps: &mut [u8],
    mans: &mut [u8],
) -> Result<(), CodecError> {
    let (alphabet, mut st) = State::open(payload, plane1, LAYOUT, exps.len())?;
    if st.signs.is_none() {
        joint::check_planes(plane1, exps, mans)?;
        joint::decode_chunks(&alphabet, plane1, exps, mans, |ec| st.decode_into(ec));
        return st.finish().map(drop);
    }
    // The raw fields are known once the signs are decoded, beside the keys.
    st.decode_into(exps);
    let raw = st.finish_signed()?;
    joint::check_planes(&raw, exps, mans)?;
    let (te, tm) = alphabet.expansion();
    joint::expand(&te, &tm, &raw, exps, mans);
    Ok(())
}

/// Decodes a payload `payload` of layout `LAYOUT` (see [`ROWS`](super::ROWS)) and its plane-1 payload
/// `plane1` of an `exp16` block straight into the block's bytes `out`, with `keys` as scratch:
/// the keys are expanded into the elements as FAST's [`huffjoint`](crate::codec::huffjoint) expands
/// its own, the transform's merge folded in, so that no planes are written and merged.
pub fn decode_words<const LAYOUT: u8>(
    payload: &[u8],
    plane1: &[u8],
    keys: &mut Vec<u8>,
    out: &mut [u8],
) -> Result<(), CodecError> {
    let (alphabet, mut st) = State::open(payload, plane1, LAYOUT, out.len() / 2)?;
    if st.signs.is_none() {
        return huffjoint::decode_words(plane1, keys, out, |keys| {
            st.decode_into(keys);
            st.finish()?;
            Ok(alphabet)
        });
    }
    let keys = huffjoint::key_scratch(keys, out)?;
    st.decode_into(keys);
    let raw = st.finish_signed()?;
    // The signs' decoder made `raw` for exactly these keys.
    huffjoint::expand_words(&alphabet, keys, &raw, out);
    Ok(())
}

impl<'a> State<'a> {
    /// The alphabet of `payload`, of layout `layout` (see [`ROWS`](super::ROWS)), and the state that
    /// decodes its `len` keys, and for the [`SIGNED`] layout the signs of plane 1's payload
    /// `plane1`.
    fn open(
        payload: &'a [u8],
        plane1: &'a [u8],
        layout: u8,
        len: usize,
    ) -> Result<(Alphabet, State<'a>), CodecError> {
        let (alphabet, rest) = Alphabet::read(payload)?;
        let (parts, base, coded) = read_layout(rest, len, layout)?;
        let st = State {
            scale: Scale::new(base, step_shift(len)),
            left: 0,
            parts,
            started: 0,
            models: Models::new(alphabet.len()),
            mag: magnitudes(&alphabet),
            streams: two_streams(coded, 0)?,
            last: [[0; QUAD]; 2],
            done: 0,
            signs: match layout {
                SIGNED => Some(Box::new(SignDecoder::open(plane1, len)?)),
                _ => None,
            },
        };
        Ok((alphabet, st))
    }

    /// Keeps the column arrays for the thread's next plane and checks that both streams
    /// ended where they should; returns plane 1's raw6 payload where the signs were decoded
    /// here.
    fn finish(self) -> Result<Option<Vec<u8>>, CodecError> {
        self.scale.keep();
        self.streams.finish()?;
        self.signs.map(|s| s.finish()).transpose()
    }

    /// [`State::finish`] of a plane whose signs were decoded here: plane 1's raw6 payload.
    fn finish_signed(self) -> Result<Vec<u8>, CodecError> {
        self.finish()?
            .ok_or(CodecError("ctxsigns plane decoded without its signs"))
    }
}
