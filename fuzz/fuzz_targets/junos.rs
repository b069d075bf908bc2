//! Arbitrary bytes as a Junos switch configuration (braces or `set`
//! lines): read, mapped to scenario keys and printed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fabricsim::fuzz::junos_input(data);
});
