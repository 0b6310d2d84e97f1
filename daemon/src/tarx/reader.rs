//! A tar reader with the header semantics and error texts of Go's
//! `archive/tar`, which the Go daemon uses to walk the archive.
//!
//! Only what extraction needs: entry name (ustar prefix, GNU `L` long
//! names and PAX `path`), typeflag, size. Behaviour copied from Go because
//! it is observable in `files.extract_tar` replies:
//!
//! - the archive ends at EOF on a header boundary or at a zero block
//!   followed by a zero block or EOF; a zero block followed by anything
//!   else, a bad checksum or a malformed number is
//!   `archive/tar: invalid tar header`; a short block or short entry data
//!   is `unexpected EOF`;
//! - PAX `x` and GNU `L`/`K` headers are consumed; a PAX global header `g`
//!   is returned as an entry of its own (as Go's `Reader.Next` does);
//! - the legacy regular-file flag NUL becomes `0`, or `5` when the name
//!   ends in `/`;
//! - header-only types (links, devices, directories, FIFOs) have no data
//!   regardless of their size field.

use super::read_error::ReadError;
use std::collections::HashMap;

const BLOCK: usize = 512;
/// Go's `maxSpecialFileSize`: the cap on PAX and GNU long-name data.
const MAX_SPECIAL: u64 = 1 << 20;

/// A source of decompressed bytes, failing as Go's readers fail.
pub(crate) trait GoRead {
    /// `Ok(0)` only at the clean end of the stream.
    fn read_go(&mut self, out: &mut [u8]) -> Result<usize, ReadError>;
}

impl<R: std::io::Read> GoRead for super::gzip::GzipReader<R> {
    fn read_go(&mut self, out: &mut [u8]) -> Result<usize, ReadError> {
        super::gzip::GzipReader::read_go(self, out)
    }
}

impl GoRead for &[u8] {
    fn read_go(&mut self, out: &mut [u8]) -> Result<usize, ReadError> {
        let n = self.len().min(out.len());
        out[..n].copy_from_slice(&self[..n]);
        *self = &self[n..];
        Ok(n)
    }
}

/// One archive entry's header, after PAX/GNU merging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    /// The name exactly as Go's `hdr.Name` (raw bytes).
    pub name: Vec<u8>,
    pub typeflag: u8,
    pub size: u64,
    /// The header's mode field (permission and special bits).
    pub mode: i64,
}

pub(crate) struct TarReader<R> {
    r: R,
    /// Data bytes of the current entry not yet read.
    remaining: u64,
    /// Padding after the current entry's data.
    pad: u64,
}

fn is_header_only(typeflag: u8) -> bool {
    matches!(typeflag, b'1' | b'2' | b'3' | b'4' | b'5' | b'6')
}

/// Go's `parser.parseString`: bytes up to the first NUL.
fn parse_string(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// Go's `parseOctal`: NUL/space trimmed; empty is 0; anything else must be
/// octal digits fitting u64.
fn parse_octal(b: &[u8]) -> Result<i64, ()> {
    let keep = |c: &u8| *c != b' ' && *c != 0;
    let Some(start) = b.iter().position(keep) else {
        return Ok(0);
    };
    let end = b.iter().rposition(keep).map_or(start, |i| i + 1);
    let s = parse_string(&b[start..end]);
    if s.is_empty() {
        return Err(());
    }
    let mut x: u64 = 0;
    for &c in s {
        if !(b'0'..=b'7').contains(&c) {
            return Err(());
        }
        x = x
            .checked_mul(8)
            .and_then(|x| x.checked_add(u64::from(c - b'0')))
            .ok_or(())?;
    }
    // Go converts the uint64 to int64 without a check.
    Ok(x as i64)
}

/// Go's `parseNumeric`: base-256 when the high bit is set, else octal.
fn parse_numeric(b: &[u8]) -> Result<i64, ()> {
    if b.first().is_some_and(|&c| c & 0x80 != 0) {
        let inv: u8 = if b[0] & 0x40 != 0 { 0xff } else { 0 };
        let mut x: u64 = 0;
        for (i, &c) in b.iter().enumerate() {
            let mut c = c ^ inv;
            if i == 0 {
                c &= 0x7f;
            }
            if x >> 56 > 0 {
                return Err(());
            }
            x = (x << 8) | u64::from(c);
        }
        if x >> 63 > 0 {
            return Err(());
        }
        return Ok(if inv == 0xff { !(x as i64) } else { x as i64 });
    }
    parse_octal(b)
}

/// Go's `parsePAX` records (`"%d %s=%s\n"`), keeping the last value per key.
fn parse_pax(mut s: &[u8]) -> Result<HashMap<Vec<u8>, Vec<u8>>, ReadError> {
    let bad = || ReadError::TarHeader;
    let mut out = HashMap::new();
    while !s.is_empty() {
        let sp = s.iter().position(|&c| c == b' ').ok_or_else(bad)?;
        let n_str = std::str::from_utf8(&s[..sp]).map_err(|_| bad())?;
        let n: usize = n_str.parse().map_err(|_| bad())?;
        if n < 5 || n > s.len() || n <= sp + 1 {
            return Err(bad());
        }
        let rec = &s[sp + 1..n - 1];
        if s[n - 1] != b'\n' {
            return Err(bad());
        }
        let eq = rec.iter().position(|&c| c == b'=').ok_or_else(bad)?;
        let (k, v) = (&rec[..eq], &rec[eq + 1..]);
        if k.is_empty() || (matches!(k, b"path" | b"linkpath" | b"uname" | b"gname") && v.contains(&0)) {
            return Err(bad());
        }
        out.insert(k.to_vec(), v.to_vec());
        s = &s[n..];
    }
    Ok(out)
}

impl<R: GoRead> TarReader<R> {
    pub(crate) fn new(r: R) -> Self {
        TarReader {
            r,
            remaining: 0,
            pad: 0,
        }
    }

    /// `io.ReadFull` of one block: `Ok(false)` on EOF before any byte.
    fn read_block(&mut self, blk: &mut [u8; BLOCK]) -> Result<bool, ReadError> {
        let mut n = 0;
        while n < BLOCK {
            let got = self.r.read_go(&mut blk[n..])?;
            if got == 0 {
                return if n == 0 {
                    Ok(false)
                } else {
                    Err(ReadError::UnexpectedEof)
                };
            }
            n += got;
        }
        Ok(true)
    }

    /// Skips `n` bytes; running out is `unexpected EOF`.
    fn discard(&mut self, mut n: u64) -> Result<(), ReadError> {
        let mut scratch = [0u8; 8192];
        while n > 0 {
            let want = usize::try_from(n).unwrap_or(usize::MAX).min(scratch.len());
            let got = self.r.read_go(&mut scratch[..want])?;
            if got == 0 {
                return Err(ReadError::UnexpectedEof);
            }
            n -= got as u64;
        }
        Ok(())
    }

    /// The current entry's data; `Ok(0)` at its end.
    pub(crate) fn read_data(&mut self, out: &mut [u8]) -> Result<usize, ReadError> {
        if self.remaining == 0 || out.is_empty() {
            return Ok(0);
        }
        let want = usize::try_from(self.remaining).unwrap_or(usize::MAX).min(out.len());
        let got = self.r.read_go(&mut out[..want])?;
        if got == 0 {
            return Err(ReadError::UnexpectedEof);
        }
        self.remaining -= got as u64;
        Ok(got)
    }

    /// Reads the source to its end after the end-of-archive blocks, so that
    /// the gzip layer checks every member's trailer (CRC-32 and size) and
    /// a stream cut short fails. Go's `archive/tar` stops at the two zero
    /// blocks and its `io.ReadFull` drops an error that arrives with the
    /// last bytes, so the reference can miss a truncated or corrupt
    /// trailer; remora never reports such an archive as a success. The
    /// bytes are discarded (at most 8 KiB held at a time).
    pub(crate) fn drain_to_end(&mut self) -> Result<(), ReadError> {
        let mut scratch = [0u8; 8192];
        while self.r.read_go(&mut scratch)? > 0 {}
        Ok(())
    }

    /// The whole data of a special (PAX/GNU) entry, capped like Go.
    fn read_special(&mut self) -> Result<Vec<u8>, ReadError> {
        if self.remaining > MAX_SPECIAL {
            return Err(ReadError::TarFieldTooLong);
        }
        let mut data = vec![0u8; usize::try_from(self.remaining).map_err(|_| ReadError::TarFieldTooLong)?];
        let mut n = 0;
        while n < data.len() {
            n += match self.read_data(&mut data[n..])? {
                0 => return Err(ReadError::UnexpectedEof),
                got => got,
            };
        }
        Ok(data)
    }

    /// Go's `Reader.Next`: the next entry, or `None` at the end.
    pub(crate) fn next_entry(&mut self) -> Result<Option<Header>, ReadError> {
        let mut pax: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut long_name: Option<Vec<u8>> = None;
        loop {
            self.discard(self.remaining + self.pad)?;
            self.remaining = 0;
            self.pad = 0;
            let Some(mut hdr) = self.read_header()? else {
                return Ok(None);
            };
            let data = if is_header_only(hdr.typeflag) { 0 } else { hdr.size };
            self.remaining = data;
            self.pad = (BLOCK as u64 - data % BLOCK as u64) % BLOCK as u64;
            match hdr.typeflag {
                b'x' | b'g' => {
                    let records = parse_pax(&self.read_special()?)?;
                    if hdr.typeflag == b'g' {
                        return Ok(Some(hdr));
                    }
                    pax = records;
                }
                b'L' | b'K' => {
                    let data = self.read_special()?;
                    if hdr.typeflag == b'L' {
                        long_name = Some(parse_string(&data).to_vec());
                    }
                }
                _ => {
                    if let Some(path) = pax.get(b"path".as_slice()) {
                        hdr.name = path.clone();
                    }
                    if let Some(size) = pax.get(b"size".as_slice()) {
                        let size = std::str::from_utf8(size)
                            .ok()
                            .and_then(|s| s.parse::<i64>().ok())
                            .and_then(|s| u64::try_from(s).ok())
                            .ok_or(ReadError::TarHeader)?;
                        hdr.size = size;
                        if !is_header_only(hdr.typeflag) {
                            self.remaining = size;
                            self.pad = (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64;
                        }
                    }
                    if let Some(name) = long_name.take() {
                        hdr.name = name;
                    }
                    if hdr.typeflag == 0 {
                        hdr.typeflag = if hdr.name.ends_with(b"/") { b'5' } else { b'0' };
                    }
                    return Ok(Some(hdr));
                }
            }
        }
    }

    /// Go's `readHeader`: one raw header block, or `None` at the end.
    fn read_header(&mut self) -> Result<Option<Header>, ReadError> {
        let mut blk = [0u8; BLOCK];
        if !self.read_block(&mut blk)? {
            return Ok(None);
        }
        if blk.iter().all(|&b| b == 0) {
            // A zero block must be followed by another one (or EOF).
            if !self.read_block(&mut blk)? || blk.iter().all(|&b| b == 0) {
                return Ok(None);
            }
            return Err(ReadError::TarHeader);
        }
        let bad = || ReadError::TarHeader;
        // Checksum over the block with the checksum field as spaces; Go
        // accepts the unsigned or the signed sum.
        let stored = parse_octal(&blk[148..156]).map_err(|_| bad())?;
        let (mut unsigned, mut signed) = (0i64, 0i64);
        for (i, &b) in blk.iter().enumerate() {
            let b = if (148..156).contains(&i) { b' ' } else { b };
            unsigned += i64::from(b);
            signed += i64::from(b as i8);
        }
        if stored != unsigned && stored != signed {
            return Err(bad());
        }
        let magic = &blk[257..263];
        let version = &blk[263..265];
        let ustar = magic == b"ustar\0";
        let star = ustar && &blk[508..512] == b"tar\0";
        let gnu = magic == b"ustar " && version == b" \0";
        let typeflag = blk[156];
        let mut name = parse_string(&blk[0..100]).to_vec();
        let mode = parse_numeric(&blk[100..108]).map_err(|_| bad())?;
        for field in [&blk[108..116], &blk[116..124], &blk[136..148]] {
            parse_numeric(field).map_err(|_| bad())?;
        }
        let size = parse_numeric(&blk[124..136]).map_err(|_| bad())?;
        let size = u64::try_from(size).map_err(|_| bad())?;
        let prefix: &[u8] = if star {
            parse_string(&blk[345..476])
        } else if ustar {
            parse_string(&blk[345..500])
        } else {
            // V7 has no prefix; GNU uses that area for atime/ctime.
            b""
        };
        if (ustar || gnu) && matches!(typeflag, b'3' | b'4') {
            parse_numeric(&blk[329..337]).map_err(|_| bad())?;
            parse_numeric(&blk[337..345]).map_err(|_| bad())?;
        }
        if !prefix.is_empty() {
            let mut full = prefix.to_vec();
            full.push(b'/');
            full.extend_from_slice(&name);
            name = full;
        }
        Ok(Some(Header {
            name,
            typeflag,
            size,
            mode,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &[u8], typeflag: u8, size: u64) -> [u8; BLOCK] {
        let mut h = tar::Header::new_ustar();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_size(size);
        h.set_mode(0o644);
        h.as_old_mut().linkflag[0] = typeflag;
        h.set_cksum();
        *h.as_bytes()
    }

    fn archive(parts: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for p in parts {
            v.extend_from_slice(p);
            let pad = (BLOCK - p.len() % BLOCK) % BLOCK;
            v.extend(std::iter::repeat_n(0u8, pad));
        }
        v
    }

    fn entries(bytes: &[u8]) -> Result<Vec<(String, u8, Vec<u8>)>, ReadError> {
        let mut r = TarReader::new(bytes);
        let mut out = Vec::new();
        while let Some(h) = r.next_entry()? {
            let mut data = Vec::new();
            let mut buf = [0u8; 100];
            loop {
                let n = r.read_data(&mut buf)?;
                if n == 0 {
                    break;
                }
                data.extend_from_slice(&buf[..n]);
            }
            out.push((String::from_utf8_lossy(&h.name).into_owned(), h.typeflag, data));
        }
        Ok(out)
    }

    #[test]
    fn reads_entries_like_go() {
        let a = archive(&[&header(b"a.txt", b'0', 3), b"abc", &header(b"d/", b'5', 0), &[0; 1024]]);
        assert_eq!(
            entries(&a).unwrap(),
            vec![("a.txt".into(), b'0', b"abc".to_vec()), ("d/".into(), b'5', vec![])]
        );
        // No end marker at all: EOF on a header boundary is a clean end.
        let a = archive(&[&header(b"a", b'0', 1), b"x"]);
        assert_eq!(entries(&a).unwrap().len(), 1);
        // One zero block then EOF is also an end.
        let mut a = archive(&[&header(b"a", b'0', 0)]);
        a.extend_from_slice(&[0; 512]);
        assert_eq!(entries(&a).unwrap().len(), 1);
        // Legacy NUL typeflag.
        let a = archive(&[&header(b"f", 0, 0), &header(b"g/", 0, 0)]);
        let e = entries(&a).unwrap();
        assert_eq!((e[0].1, e[1].1), (b'0', b'5'));
        // GNU long name and PAX path.
        let long = "x/".repeat(80) + "end";
        let a = archive(&[
            &header(b"././@LongLink", b'L', long.len() as u64 + 1),
            format!("{long}\0").as_bytes(),
            &header(b"short", b'0', 0),
        ]);
        assert_eq!(entries(&a).unwrap()[0].0, long);
        let rec = b"21 path=pax/name.txt\n";
        let a = archive(&[
            &header(b"PaxHeaders/x", b'x', rec.len() as u64),
            rec,
            &header(b"short", b'0', 0),
        ]);
        assert_eq!(entries(&a).unwrap()[0].0, "pax/name.txt");
        // A global header is an entry of its own.
        let rec = b"19 comment=abcdefg\n";
        let a = archive(&[&header(b"pax_global_header", b'g', rec.len() as u64), rec]);
        assert_eq!(entries(&a).unwrap()[0].1, b'g');
        // Header-only types carry no data even with a size.
        let a = archive(&[&header(b"dir/", b'5', 512), &header(b"f", b'0', 0)]);
        assert_eq!(entries(&a).unwrap().len(), 2);
    }

    #[test]
    fn errors_use_go_texts() {
        let mut bad = header(b"a", b'0', 0);
        bad[0] = b'b';
        assert_eq!(
            entries(&bad).unwrap_err().to_string(),
            "archive/tar: invalid tar header"
        );
        let mut a = vec![0u8; 512];
        a.extend_from_slice(&header(b"a", b'0', 0));
        assert_eq!(entries(&a).unwrap_err().to_string(), "archive/tar: invalid tar header");
        assert_eq!(
            entries(&header(b"a", b'0', 0)[..100]).unwrap_err().to_string(),
            "unexpected EOF"
        );
        let mut a = header(b"a", b'0', 10).to_vec();
        a.extend_from_slice(b"abc");
        assert_eq!(entries(&a).unwrap_err().to_string(), "unexpected EOF");
        let mut h = header(b"a", b'0', 0);
        h[124..136].copy_from_slice(b"0000000009z\0");
        let mut sum: u32 = h
            .iter()
            .enumerate()
            .map(|(i, &b)| if (148..156).contains(&i) { 32 } else { u32::from(b) })
            .sum();
        sum &= 0o777777;
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        assert_eq!(entries(&h).unwrap_err().to_string(), "archive/tar: invalid tar header");
        assert_eq!(parse_octal(b"0000644\0"), Ok(0o644));
        assert_eq!(parse_octal(b"  \0\0"), Ok(0));
        assert_eq!(parse_numeric(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]), Ok(256));
    }
}
