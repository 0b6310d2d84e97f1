//! Archives built byte by byte for the `files.extract_tar` tests: raw
//! ustar headers (the `tar` crate refuses names such as `..`), gzip'd.

use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;

/// One archive entry: `(name, typeflag, data)`.
pub type Entry<'a> = (&'a [u8], u8, &'a [u8]);

/// `data` gzip'd.
pub fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A ustar header with a raw name and typeflag (the tar crate refuses `..`).
pub fn raw_header(name: &[u8], typeflag: u8, size: u64) -> Vec<u8> {
    let mut h = tar::Header::new_ustar();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.as_old_mut().linkflag[0] = typeflag;
    h.set_size(size);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_cksum();
    h.as_bytes().to_vec()
}

/// A tar stream of `(name, typeflag, data)` entries with the end marker.
pub fn raw_tar(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, typeflag, data) in entries {
        out.extend(raw_header(name, *typeflag, data.len() as u64));
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend_from_slice(&[0u8; 1024]);
    out
}
