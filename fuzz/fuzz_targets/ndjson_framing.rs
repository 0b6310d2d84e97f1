//! Fuzz target `ndjson_framing`: see `remora::fuzzing::ndjson_framing` for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora::fuzzing::ndjson_framing(data));
