//! What a codec is to the container and the block decoder: the codec ids ([`Codec`]), where a
//! plane sits ([`Slot`]) and a codec's rules ([`Spec`]). The codecs and their registry
//! (`codec/mod.rs`) both use this module, and it uses none of them.

use crate::error::CodecError;
use crate::transform::Transform;

/// How one plane is stored: the codecs of this build. Each codec's `SPEC` states its id; the
/// variants' values are the same (a test checks it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Codec {
    /// [`stored`](super::stored).
    Stored = 0,
    /// [`constant`](super::constant).
    Const = 1,
    /// [`huffman`](super::huffman).
    Huffman = 2,
    /// [`range`](super::range).
    Range = 3,
    /// [`adaptive`](super::adaptive).
    Adaptive = 4,
    /// [`context`](super::context).
    Context = 5,
    /// [`joint`](super::joint).
    Joint = 6,
    /// [`raw6`](super::raw6).
    Raw6 = 7,
    /// [`huffjoint`](super::huffjoint).
    HuffJoint = 8,
    /// [`ctxjoint`](super::ctxjoint).
    CtxJoint = 9,
    /// [`sparse`](super::sparse).
    Sparse = 10,
    /// [`basectx`](super::basectx).
    BaseCtx = 11,
    /// [`ctxjoint`](super::ctxjoint) over the parts of a block that holds several tensors.
    CtxTensors = 12,
    /// [`ctxjoint`](super::ctxjoint) over the parts of a block, with [`signs`](super::signs) as plane 1.
    CtxSigns = 13,
    /// [`signs`](super::signs).
    Signs = 14,
    /// [`byctx`](super::byctx).
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
