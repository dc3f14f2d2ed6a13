//! Listing an `s3://` prefix: ListObjectsV2 requested and read here, because `object_store`
//! fails a whole listing on one key it cannot make a path of (a control character, or an
//! empty, `.` or `..` part); such a key is skipped here, and named ([`Listing::skipped`]).

use super::{block_on, one_line, Location};
use crate::error::{Error, Result};
use object_store::aws::{AmazonS3, AwsAuthorizer};
use object_store::client::{HttpRequest, HttpRequestBody};
use object_store::path::Path;
use std::sync::Arc;

/// What [`list_skipping`](super::list_skipping) found under a prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listing {
    /// Each object's location and size, sorted by key.
    pub objects: Vec<(String, u64)>,
    /// The locations of the objects left out, sorted: their keys are not ones this library
    /// can read (a control character, or an empty, `.` or `..` part). They may hold control
    /// characters: show them escaped.
    pub skipped: Vec<String>,
}

/// Most bytes of one page of a listing (a page lists at most 1,000 keys of at most 1 KiB).
const MAX_PAGE: usize = 16 << 20;

/// Most pages of one listing: 100 million keys.
const MAX_PAGES: usize = 100_000;

/// What signing and sending an S3 request of our own takes.
pub(super) struct S3Requests {
    pub(super) store: Arc<AmazonS3>,
    pub(super) client: reqwest::Client,
    /// The bucket's URL: `ENDPOINT/BUCKET` (path style), or the bucket's own host.
    pub(super) bucket_url: String,
    pub(super) region: String,
    /// Whether requests are signed (keys in the environment).
    pub(super) signed: bool,
}

impl S3Requests {
    /// Sends `method` to `url` (with `body`), signed when keys are set.
    async fn send(&self, method: reqwest::Method, url: url::Url, body: Vec<u8>) -> Result<String> {
        let mut req = HttpRequest::new(HttpRequestBody::from(body.clone()));
        *req.method_mut() = method.clone();
        *req.uri_mut() = match url.as_str().parse() {
            Ok(uri) => uri,
            Err(_) => return Err(Error::InvalidArgument(format!("{url}: not a valid URI"))),
        };
        if self.signed {
            let failed = |e: object_store::Error| Error::Remote {
                location: url.to_string(),
                reason: one_line(&e.to_string()),
            };
            let credential = self
                .store
                .credentials()
                .get_credential()
                .await
                .map_err(failed)?;
            AwsAuthorizer::new(&credential, "s3", &self.region)
                .try_authorize(&mut req, None)
                .map_err(failed)?;
        }
        let sent = self
            .client
            .request(method, url.clone())
            .headers(req.headers().clone())
            .body(body)
            .send()
            .await;
        let failed = |e: reqwest::Error| Error::Remote {
            location: url.to_string(),
            reason: one_line(&e.to_string()),
        };
        let mut answer = sent.map_err(failed)?;
        let status = answer.status();
        let mut text = Vec::new();
        while let Some(chunk) = answer.chunk().await.map_err(failed)? {
            if text.len() + chunk.len() > MAX_PAGE {
                return Err(Error::Remote {
                    location: url.to_string(),
                    reason: format!("an answer of over {MAX_PAGE} bytes: a server error"),
                });
            }
            text.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        if !status.is_success() {
            let said = tag(&text, "Message").or_else(|| tag(&text, "Code"));
            return Err(Error::Remote {
                location: url.to_string(),
                reason: one_line(&format!("{status}: {}", said.unwrap_or_default())),
            });
        }
        Ok(text)
    }
}

/// Lists every object under `loc` (an `s3://` location whose path is the prefix).
pub(super) fn list(loc: &Location, s3: &S3Requests, bucket: &str) -> Result<Listing> {
    let prefix = match loc.path.as_ref() {
        "" => String::new(),
        p => format!("{p}/"),
    };
    let mut listing = Listing::default();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut url = url::Url::parse(&s3.bucket_url).map_err(|e| Error::Remote {
            location: loc.url.clone(),
            reason: e.to_string(),
        })?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("list-type", "2");
            q.append_pair("encoding-type", "url");
            q.append_pair("prefix", &prefix);
            if let Some(t) = &token {
                q.append_pair("continuation-token", t);
            }
        }
        let page = block_on(
            loc.cancel.as_ref(),
            s3.send(reqwest::Method::GET, url, Vec::new()),
        )?
        .map_err(|e| match e {
            Error::Remote { reason, .. } => Error::Remote {
                location: loc.url.clone(),
                reason,
            },
            e => e,
        })?;
        let encoded = tag(&page, "EncodingType").is_some_and(|t| t.eq_ignore_ascii_case("url"));
        for entry in page.split("<Contents>").skip(1) {
            let key = tag(entry, "Key").map(|k| match encoded {
                true => url_decoded(&k),
                false => k,
            });
            let size = tag(entry, "Size").and_then(|s| s.trim().parse::<u64>().ok());
            let (Some(key), Some(size)) = (key, size) else {
                return Err(Error::Remote {
                    location: loc.url.clone(),
                    reason: "a listing entry without a key or size: a server error".into(),
                });
            };
            let location = format!("s3://{bucket}/{key}");
            match Path::parse(&key) {
                Ok(_) => listing.objects.push((location, size)),
                Err(_) => listing.skipped.push(location),
            }
        }
        let truncated = tag(&page, "IsTruncated").is_some_and(|t| t.trim() == "true");
        token = tag(&page, "NextContinuationToken").filter(|_| truncated);
        if token.is_none() {
            listing.objects.sort();
            listing.skipped.sort();
            return Ok(listing);
        }
    }
    Err(Error::Remote {
        location: loc.url.clone(),
        reason: format!("a listing of over {MAX_PAGES} pages"),
    })
}

/// Puts `body` at `key` of the bucket, whatever the key, for tests that need an object whose
/// key the rest of this library refuses.
#[cfg(feature = "internals")]
pub(super) fn put(loc: &Location, s3: &S3Requests, key: &str) -> Result<()> {
    let mut url =
        url::Url::parse(&s3.bucket_url).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    url.path_segments_mut()
        .map_err(|()| Error::InvalidArgument("no path".into()))?
        .pop_if_empty()
        .extend(key.split('/'));
    block_on(
        loc.cancel.as_ref(),
        s3.send(reqwest::Method::PUT, url, b"crafted".to_vec()),
    )??;
    Ok(())
}

/// The text of the first element `name` in `xml`, its entities decoded.
fn tag(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    Some(unescaped(&xml[start..end]))
}

/// XML text with its entities (`&amp;`, `&#27;`, ...) decoded; one it does not know is kept.
fn unescaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let entity = rest.find(';').map(|end| (&rest[1..end], end));
        let decoded = entity.and_then(|(name, end)| {
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                n => match n.strip_prefix("#x").or_else(|| n.strip_prefix("#X")) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok().and_then(char::from_u32),
                    None => n
                        .strip_prefix('#')
                        .and_then(|d| d.parse().ok())
                        .and_then(char::from_u32),
                },
            };
            c.map(|c| (c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A key as `encoding-type=url` sends it (`%XX` escapes, `+` for a space), decoded; bytes
/// that are not UTF-8 are replaced.
fn url_decoded(key: &str) -> String {
    let b = key.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |at: usize| b.get(at).and_then(|&c| (c as char).to_digit(16));
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b'+', ..) => {
                out.push(b' ');
                i += 1;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_from_xml_and_url_escapes() {
        assert_eq!(
            unescaped("a&amp;b&#27;c&#x1B;&lt;&bogus;&"),
            "a&b\u{1b}c\u{1b}<&bogus;&"
        );
        assert_eq!(url_decoded("m%2Fa+b%1B%zz.sc"), "m/a b\u{1b}%zz.sc");
        let page = "<R><IsTruncated>true</IsTruncated><Contents><Key>a%26</Key><Size>3</Size>\
                    </Contents><NextContinuationToken>t&amp;1</NextContinuationToken></R>";
        assert_eq!(tag(page, "Key").as_deref(), Some("a%26"));
        assert_eq!(tag(page, "NextContinuationToken").as_deref(), Some("t&1"));
        assert_eq!(tag(page, "Missing"), None);
    }
}
