//! Arbitrary bytes as a scenario file: parsed, resolved and described.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fabricsim::fuzz::scenario_input(data);
});
