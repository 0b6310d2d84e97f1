//! Fuzz target `stdin_offset`: see `remora::fuzzing::stdin_offset` for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora::fuzzing::stdin_offset(data));
