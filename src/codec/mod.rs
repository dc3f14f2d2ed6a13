//! Plane codecs: how each plane of a block is stored, one file per codec.
//!
//! A codec's file holds everything about it: its id and name in the format, where its planes
//! may sit and how long their payloads may be ([`Spec::fits`], [`Spec::partner`]), its
//! encoder, and its decoder ([`Spec::decode`]). So listing this folder lists the format's codec
//! ids (`ctxjoint` holds three), but for `spec.rs`: the ids ([`Codec`]) and the rules' types
//! ([`Slot`], [`Spec`], [`Decode`]), which the codecs take from there and not from this
//! registry, so that no codec imports the module that lists it. The machinery several codecs share (the range coder, the
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
//! `docs/ARCHITECTURE.md`, "Adding a codec", names every file to touch: this folder (the codec's
//! file, its variant in [`Codec`] and its arm in [`Codec::spec`]), `crate::choice`, the
//! container version, `docs/FORMAT.md`, the fuzz target's decoders, `tests/coders.rs` and the
//! golden archives with their manifest. `tests/checklists.rs` checks the fuzz target and
//! `tests/coders.rs` against [`Codec::ALL`].

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

mod spec;

pub use crate::error::CodecError;
pub use spec::{BaseFn, Codec, Decode, GivenFn, PairFn, PlaneFn, Slot, Spec, WordsFn};

impl Codec {
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
