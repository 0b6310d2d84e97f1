//! Fuzz target `params_decode`: see `remora::fuzzing::params_decode` for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora::fuzzing::params_decode(data));
