//! Fuzz target `homeguard_paths`: see `remora::fuzzing::homeguard_paths` for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora::fuzzing::homeguard_paths(data));
