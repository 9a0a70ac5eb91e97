//! A one-line description of a served certificate for the start-up log: its file, subject
//! common name, expiry and SHA-256 fingerprint. Reads just enough DER (the X.509
//! `tbsCertificate` fields up to the subject) to find them; anything it cannot read is
//! left out of the line rather than failing (rustls has already accepted the certificate).
//!
//! Owns: that description. Does not own: certificate validation (rustls).

use rustls::pki_types::CertificateDer;
use sha2::{Digest, Sha256};
use std::path::Path;

/// `cert.pem (subject CN=..., valid until 2026-05-01 12:00:00 UTC, sha256 ab:cd:...)`.
pub(super) fn describe(path: &Path, cert: &CertificateDer<'_>) -> String {
    let mut parts = Vec::new();
    let fields = tbs_fields(cert.as_ref());
    if let Some(cn) = fields.as_ref().and_then(|f| common_name(f.subject)) {
        parts.push(format!("subject CN={cn}"));
    }
    if let Some(until) = fields.as_ref().and_then(|f| time_text(f.not_after)) {
        parts.push(format!("valid until {until}"));
    }
    let digest = Sha256::digest(cert.as_ref());
    let hex: Vec<String> = digest.iter().map(|b| format!("{b:02x}")).collect();
    parts.push(format!("sha256 {}", hex.join(":")));
    format!("{} ({})", path.display(), parts.join(", "))
}

/// One DER element: tag, contents, and what follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

struct TbsFields<'a> {
    not_after: (u8, &'a [u8]),
    subject: &'a [u8],
}

/// Walks Certificate → tbsCertificate → [version], serial, signature, issuer, validity, subject.
fn tbs_fields(der: &[u8]) -> Option<TbsFields<'_>> {
    let (_, cert, _) = element(der)?;
    let (_, tbs, _) = element(cert)?;
    let (tag, _, after_version) = element(tbs)?;
    let rest = if tag == 0xa0 { after_version } else { tbs }; // [0] version is optional
    let (_, _, rest) = element(rest)?; // serial number
    let (_, _, rest) = element(rest)?; // signature algorithm
    let (_, _, rest) = element(rest)?; // issuer
    let (_, validity, rest) = element(rest)?;
    let (_, _, after) = element(validity)?;
    let (time_tag, not_after, _) = element(after)?;
    let (_, subject, _) = element(rest)?;
    Some(TbsFields {
        not_after: (time_tag, not_after),
        subject,
    })
}

/// The first common name (OID 2.5.4.3) in a Name.
fn common_name(mut name: &[u8]) -> Option<String> {
    while let Some((_, set, rest)) = element(name) {
        let (_, attr, _) = element(set)?;
        let (oid_tag, oid, value) = element(attr)?;
        if oid_tag == 0x06 && oid == [0x55, 0x04, 0x03] {
            let (_, text, _) = element(value)?;
            return std::str::from_utf8(text).ok().map(str::to_owned);
        }
        name = rest;
    }
    None
}

/// UTCTime (0x17, YYMMDDHHMMSSZ) or GeneralizedTime (0x18, YYYYMMDDHHMMSSZ) as text.
fn time_text((tag, raw): (u8, &[u8])) -> Option<String> {
    let text = std::str::from_utf8(raw).ok()?.strip_suffix('Z')?;
    let full = match tag {
        0x17 if text.len() == 12 => {
            let yy: u32 = text[..2].parse().ok()?;
            format!("{}{text}", if yy >= 50 { "19" } else { "20" })
        }
        0x18 if text.len() == 14 => text.to_owned(),
        _ => return None,
    };
    if !full.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!(
        "{}-{}-{} {}:{}:{} UTC",
        &full[..4],
        &full[4..6],
        &full[6..8],
        &full[8..10],
        &full[10..12],
        &full[12..14]
    ))
}
