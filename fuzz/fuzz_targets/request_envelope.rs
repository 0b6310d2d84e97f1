//! Fuzz target `request_envelope`: see `remora::fuzzing::request_envelope` for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora::fuzzing::request_envelope(data));
