//! Arbitrary bytes as a Chakra trace (one to four ranks): decoded and
//! added to a task graph.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fabricsim::fuzz::chakra_input(data);
});
