//! Fuzz target `tar_extract`: see `remora::fuzzing::tar_extract` for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora::fuzzing::tar_extract(data));
