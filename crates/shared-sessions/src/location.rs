//! Where the objects go: an `s3://bucket/prefix` URL, with the endpoint,
//! region and credentials from the standard `AWS_*` variables (so AWS S3,
//! Cloudflare R2, GCS's S3 interface and a self-hosted SeaweedFS all work).

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, RetryConfig};
use object_store::path::Path;

use crate::error::SharedStoreError;

/// A bucket and the prefix under which this fleet keeps its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectLocation {
    pub bucket: String,
    pub prefix: String,
}

impl ObjectLocation {
    /// Parses `s3://bucket[/prefix]`.
    pub fn parse(url: &str) -> Result<Self, SharedStoreError> {
        let refused = || SharedStoreError::Location(url.to_owned());
        let parsed = url::Url::parse(url).map_err(|_| refused())?;
        if parsed.scheme() != "s3" {
            return Err(refused());
        }
        let bucket = parsed.host_str().filter(|b| !b.is_empty()).ok_or_else(refused)?.to_owned();
        let prefix = parsed.path().trim_matches('/').to_owned();
        Ok(Self { bucket, prefix })
    }

    /// The object store for the bucket, configured from the environment.
    pub(crate) fn open(&self) -> Result<Arc<dyn ObjectStore>, SharedStoreError> {
        install_tls_provider();
        // A store that does not answer fails the call within seconds, so a
        // hand-over holding a session's run lock gives up and the session
        // goes on where it is (the client's default retries for minutes).
        let retry = RetryConfig { backoff: BackoffConfig::default(), max_retries: 2, retry_timeout: Duration::from_secs(5) };
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(&self.bucket)
            .with_retry(retry)
            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), "2s")
            // A store that accepts a connection and then says nothing is cut
            // off too (a 50 MiB file takes well under a second on a LAN).
            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), "60s")
            .build()?;
        Ok(Arc::new(store))
    }

    /// The object path `parts` under the prefix.
    pub(crate) fn path(&self, parts: &[&str]) -> Path {
        let joined = parts.join("/");
        if self.prefix.is_empty() { Path::from(joined) } else { Path::from(format!("{}/{joined}", self.prefix)) }
    }
}

/// TLS for the object store's client: rustls on ring, installed once per
/// process (a second install is refused, harmlessly).
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_its_bucket_and_prefix() {
        assert_eq!(ObjectLocation::parse("s3://sessions/fleet/a").unwrap(), ObjectLocation { bucket: "sessions".into(), prefix: "fleet/a".into() });
        assert_eq!(ObjectLocation::parse("s3://sessions").unwrap(), ObjectLocation { bucket: "sessions".into(), prefix: String::new() });
        assert!(ObjectLocation::parse("https://sessions/x").is_err());
        assert!(ObjectLocation::parse("s3:///x").is_err());
    }

    #[test]
    fn paths_sit_under_the_prefix() {
        let location = ObjectLocation::parse("s3://b/p").unwrap();
        assert_eq!(location.path(&["blobs", "ab"]).as_ref(), "p/blobs/ab");
        let bare = ObjectLocation::parse("s3://b").unwrap();
        assert_eq!(bare.path(&["blobs", "ab"]).as_ref(), "blobs/ab");
    }
}
