//! Arbitrary bytes as an NX-OS switch configuration: read, mapped to
//! scenario keys and printed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fabricsim::fuzz::nxos_input(data);
});
