//! The derived-reference decoder (a quant coded against its seed): arbitrary bytes as an archive
//! decoded against the ladder seed, and as a reference section's body whose entries are
//! checked and predicted (`sc::fuzz::derived`); never a panic, hang or huge allocation.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sc::fuzz::derived(data));
