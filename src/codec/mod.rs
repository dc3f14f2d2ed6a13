//! Plane codecs: how each plane of a block is stored, one file per codec.
//!
//! A codec's file holds everything about it: its id and name in the format, where its planes
//! may sit and how long their payloads may be ([`Spec::fits`], [`Spec::partner`]), its
//! encoder, and its decoder ([`Spec::decode`]). So listing this folder lists the format's codec
//! ids (`ctxjoint` holds three). The machinery several codecs share (the range coder, the
//! adaptive model, the joint alphabet, the row layout) lives apart, in `crate::entropy`. Which
//! codec codes which plane is decided in `crate::choice`.
//!
//! | id | codec | coder |
//! |---:|---|---|
//! | 0 | [`stored`] | the bytes as they are |
//! | 1 | [`constant`] | one byte for a plane of one value |
//! | 2 | [`huffman`] | canonical Huffman, 4 streams (FAST) |
//! | 3 | [`range`] | range coder, static order-0 model (BEST) |
//! | 4 | [`adaptive`] | range coder, adaptive order-0 model (BEST) |
//! | 5 | [`context`] | sign/mantissa bits modelled on the exponent plane (BEST) |
//! | 6 | [`joint`] | exponent and top mantissa bits as one adaptive symbol (BEST) |
//! | 7 | [`raw6`] | the other 6 bits of each sign/mantissa byte, packed (partner of 6, 8, 9, 12) |
//! | 8 | [`huffjoint`] | the joint symbols Huffman-coded, decoded into BF16 words (FAST) |
//! | 9 | [`ctxjoint`] | the joint symbols with models chosen by row and column magnitude (BEST) |
//! | 10 | [`sparse`] | one byte almost everywhere: the byte and the exceptions (delta planes) |
//! | 11 | [`basectx`] | a fine-tune's differences modelled on the base's magnitude (BEST) |
//! | 12 | [`ctxjoint`] (`ctxtensors`) | as 9, over a block of several tensors, each in its rows (BEST) |
//! | 13 | [`ctxjoint`] (`ctxsigns`) | as 12, over one tensor or more, with [`signs`] as plane 1 (BEST) |
//! | 14 | [`signs`] | the signs range coded by column, bits 4..0 packed (partner of 13) |
//! | 15 | [`byctx`] | a ggml block's scale low bytes, a model per high byte (BEST) |
//!
//! # Adding a codec
//! 1. Write `codec/<name>.rs`: its encoder, its decoder and its `SPEC` (id, name, placement
//!    and length rules, decoding; [`Spec::plane_coder`] for a coder of single planes).
//! 2. List it in [`Codec`]: a variant with its id, and its arm in [`Codec::spec`].
//! 3. Let `crate::choice` pick it, with named margins for what it trades.
//! 4. Specify its payload in `docs/FORMAT.md`. Decoders refuse ids they do not know, so an
//!    archive using it needs a decoder that has it.

pub mod adaptive;
pub mod basectx;
pub mod byctx;
pub mod constant;
pub mod context;
pub mod ctxjoint;
pub mod huffjoint;
pub mod huffman;
pub mod joint;
pub mod range;
pub mod raw6;
pub mod signs;
pub mod sparse;
pub mod stored;

pub use crate::error::CodecError;
use crate::transform::Transform;

/// How one plane is stored: the codecs of this build. Each codec's `SPEC` states its id; the
/// variants' values are the same (a test checks it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Codec {
    /// [`stored`].
    Stored = 0,
    /// [`constant`].
    Const = 1,
    /// [`huffman`].
    Huffman = 2,
    /// [`range`].
    Range = 3,
    /// [`adaptive`].
    Adaptive = 4,
    /// [`context`].
    Context = 5,
    /// [`joint`].
    Joint = 6,
    /// [`raw6`].
    Raw6 = 7,
    /// [`huffjoint`].
    HuffJoint = 8,
    /// [`ctxjoint`].
    CtxJoint = 9,
    /// [`sparse`].
    Sparse = 10,
    /// [`basectx`].
    BaseCtx = 11,
    /// [`ctxjoint`] over the parts of a block that holds several tensors.
    CtxTensors = 12,
    /// [`ctxjoint`] over the parts of a block, with [`signs`] as plane 1.
    CtxSigns = 13,
    /// [`signs`].
    Signs = 14,
    /// [`byctx`].
    ByCtx = 15,
}

impl Codec {
    /// Every codec, in id order.
    pub const ALL: [Codec; 16] = [
        Codec::Stored,
        Codec::Const,
        Codec::Huffman,
        Codec::Range,
        Codec::Adaptive,
        Codec::Context,
        Codec::Joint,
        Codec::Raw6,
        Codec::HuffJoint,
        Codec::CtxJoint,
        Codec::Sparse,
        Codec::BaseCtx,
        Codec::CtxTensors,
        Codec::CtxSigns,
        Codec::Signs,
        Codec::ByCtx,
    ];

    /// The codec with id `id`, if this build has it.
    pub fn from_id(id: u8) -> Option<Codec> {
        Codec::ALL.into_iter().find(|c| c.id() == id)
    }

    /// The id that names the codec in block records.
    pub fn id(self) -> u8 {
        self.spec().id
    }

    /// What the codec is to the container and the block decoder.
    pub fn spec(self) -> &'static Spec {
        match self {
            Codec::Stored => &stored::SPEC,
            Codec::Const => &constant::SPEC,
            Codec::Huffman => &huffman::SPEC,
            Codec::Range => &range::SPEC,
            Codec::Adaptive => &adaptive::SPEC,
            Codec::Context => &context::SPEC,
            Codec::Joint => &joint::SPEC,
            Codec::Raw6 => &raw6::SPEC,
            Codec::HuffJoint => &huffjoint::SPEC,
            Codec::CtxJoint => &ctxjoint::SPEC,
            Codec::Sparse => &sparse::SPEC,
            Codec::BaseCtx => &basectx::SPEC,
            Codec::CtxTensors => &ctxjoint::TENSORS_SPEC,
            Codec::CtxSigns => &ctxjoint::SIGNED_SPEC,
            Codec::Signs => &signs::SPEC,
            Codec::ByCtx => &byctx::SPEC,
        }
    }

    /// Lower-case name, as `sc info` prints it.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// Where a plane sits: what a codec's placement and length rules are judged on.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// Plane number in the block, from 0.
    pub plane: usize,
    /// The block's transform.
    pub transform: Transform,
    /// Bytes of the plane once decoded.
    pub plane_len: u32,
}

/// A plane decoder: payload in, plane out.
pub type PlaneFn = fn(&[u8], &mut [u8]) -> Result<(), CodecError>;
/// A decoder of planes 0 and 1 together, from their two payloads.
pub type PairFn = fn(&[u8], &[u8], &mut [u8], &mut [u8]) -> Result<(), CodecError>;
/// A decoder of plane 1 given plane 0: payload, plane 0, plane 1 out.
pub type GivenFn = fn(&[u8], &[u8], &mut [u8]) -> Result<(), CodecError>;
/// A decoder of plane 1 given plane 0 and the block's base bytes: payload, plane 0, base, plane
/// 1 out.
pub type BaseFn = fn(&[u8], &[u8], &[u8], &mut [u8]) -> Result<(), CodecError>;
/// A decoder of a pair straight into the block's 16-bit elements: payloads 0 and 1, scratch,
/// block out.
pub type WordsFn = fn(&[u8], &[u8], &mut Vec<u8>, &mut [u8]) -> Result<(), CodecError>;

/// How a codec's plane is decoded.
#[derive(Clone, Copy, Debug)]
pub enum Decode {
    /// From its payload alone.
    Plane(PlaneFn),
    /// Plane 1, from its payload and the decoded plane 0 (`decode(payload, plane0, out)`).
    /// `fused`: where plane 0 has that codec, both planes decode in one interleaved pass.
    GivenPlane0 {
        /// Decodes the plane given plane 0.
        decode: GivenFn,
        /// The codec of plane 0 and the decoder of both planes' payloads into both planes.
        fused: Option<(Codec, PairFn)>,
    },
    /// Plane 0 of a pair, decoded from the payloads of both planes: into the two planes
    /// (`both`), or, in an `exp16` block, straight into the block's 16-bit elements with the
    /// transform's merge folded in (`words`: `decode(payload0, payload1, scratch, block)`). A
    /// codec has at least one of the two; a block decodes through `words` where it can.
    Pair {
        /// Decodes both planes.
        both: Option<PairFn>,
        /// Decodes an `exp16` block's elements.
        words: Option<WordsFn>,
    },
    /// Plane 1 of a pair, decoded by the codec of plane 0.
    Partner,
    /// Plane 1 of a delta block, from its payload, the decoded plane 0 and the block's base
    /// bytes (`decode(payload, plane0, base, out)`).
    GivenBase(BaseFn),
}

/// A codec's identity and rules.
#[derive(Debug)]
pub struct Spec {
    /// The id that names the codec in block records.
    pub id: u8,
    /// Lower-case name.
    pub name: &'static str,
    /// Whether a plane of this codec may sit at the slot with a payload of this many bytes.
    pub fits: fn(Slot, u32) -> bool,
    /// The codec that must code plane 1 when this one codes plane 0, for codecs that come as a
    /// pair.
    pub partner: Option<Codec>,
    /// How its planes decode.
    pub decode: Decode,
}

impl Spec {
    /// The spec of an entropy coder of single planes (huffman, range, adaptive): any plane,
    /// a payload that is not empty and smaller than the plane stored (the encoder stores the
    /// plane otherwise), decoded on its own.
    pub const fn plane_coder(id: u8, name: &'static str, decode: PlaneFn) -> Spec {
        Spec {
            id,
            name,
            fits: |at, coded_len| coded_len > 0 && coded_len < at.plane_len,
            partner: None,
            decode: Decode::Plane(decode),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_the_codecs_own() {
        for codec in Codec::ALL {
            assert_eq!(codec.spec().id, codec as u8, "{codec:?}");
            assert_eq!(Codec::from_id(codec as u8), Some(codec));
        }
        let mut names: Vec<&str> = Codec::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Codec::ALL.len());
        assert_eq!(Codec::from_id(255), None);
    }
}
