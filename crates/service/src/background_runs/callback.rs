//! A run's callback: its status and report `POST`ed to the URL it named
//! when it ends, signed with the service's key, retried with backoff, and
//! only to a host the operator allows (`--callback-allow HOST:PORT,...`;
//! none by default, so the service reaches nowhere unless told to). A run
//! naming any other host is refused when it is submitted.
//!
//! The signature is `X-Anypath-Signature: t=<unix seconds>,v1=<hex>`, the
//! HMAC-SHA256 under the service's signing key of `<t>.<body>`: a receiver
//! recomputes it over the bytes it got and checks `t` is recent.

use std::time::Duration;

use anypath_interpreter::Signer;
use anypath_wire::RunStatus;

use crate::service_error::ServiceError;

/// Waits between tries: the first try at once, then these.
const BACKOFF: [Duration; 5] = [
    Duration::from_millis(500),
    Duration::from_secs(2),
    Duration::from_secs(5),
    Duration::from_secs(15),
    Duration::from_secs(60),
];
/// How long one try may take.
const TRY_TIMEOUT: Duration = Duration::from_secs(10);

/// The hosts callbacks may go to.
#[derive(Debug, Clone, Default)]
pub struct CallbackPolicy {
    /// `(host, port)`, the host in lowercase.
    allowed: Vec<(String, u16)>,
}

/// An entry of `--callback-allow` that is not `HOST:PORT`.
#[derive(Debug, thiserror::Error)]
#[error("--callback-allow entry {0:?} is not HOST:PORT")]
pub struct CallbackAllowError(String);

impl CallbackPolicy {
    /// The policy of `HOST:PORT` entries (none: no callback is allowed).
    pub fn parse(entries: &[String]) -> Result<Self, CallbackAllowError> {
        let allowed = entries
            .iter()
            .map(|entry| {
                let (host, port) = entry.trim().rsplit_once(':').ok_or_else(|| CallbackAllowError(entry.clone()))?;
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let port = port.parse::<u16>().map_err(|_| CallbackAllowError(entry.clone()))?;
                if host.is_empty() {
                    return Err(CallbackAllowError(entry.clone()));
                }
                Ok((host.to_ascii_lowercase(), port))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { allowed })
    }

    /// The callback URL, when its host and port are allowed; the refusal
    /// otherwise (the run is not started).
    pub(crate) fn check(&self, url: &str) -> Result<url::Url, ServiceError> {
        let refuse = |why: &str| ServiceError::CallbackNotAllowed(format!("callback_url {url:?}: {why}"));
        let parsed = url::Url::parse(url).map_err(|_| refuse("not a URL"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(refuse("only http and https are called back"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(refuse("a URL with credentials is refused"));
        }
        let host = parsed.host_str().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()).ok_or_else(|| refuse("no host"))?;
        let port = parsed.port_or_known_default().ok_or_else(|| refuse("no port"))?;
        if self.allowed.iter().any(|(h, p)| *h == host && *p == port) {
            Ok(parsed)
        } else {
            Err(refuse("its host and port are not in the operator's --callback-allow list"))
        }
    }
}

/// The signature header's value for `body` sent at `t` (unix seconds).
pub(crate) fn signature(signer: &Signer, t: u64, body: &[u8]) -> String {
    let mut signed = format!("{t}.").into_bytes();
    signed.extend_from_slice(body);
    format!("t={t},v1={}", signer.sign_bytes(&signed))
}

/// Sends `status` to `url`, trying again with backoff until a 2xx answer, a
/// refusal that another try would not change (a 4xx other than 408 and
/// 429), or the tries run out. Redirects are not followed: they could lead
/// past the allowed hosts.
pub(crate) async fn deliver(url: url::Url, status: RunStatus, signer: Signer) {
    let Ok(body) = serde_json::to_vec(&status) else { return };
    let client = match reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).timeout(TRY_TIMEOUT).build() {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "no HTTP client for callbacks");
            return;
        }
    };
    let waits = std::iter::once(Duration::ZERO).chain(BACKOFF);
    for (attempt, wait) in waits.enumerate() {
        tokio::time::sleep(wait).await;
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let sent = client
            .post(url.clone())
            .header("content-type", "application/json")
            .header("x-anypath-run-id", &status.run_id)
            .header("x-anypath-signature", signature(&signer, t, &body))
            .body(body.clone())
            .send()
            .await;
        let outcome = match sent {
            Ok(answer) if answer.status().is_success() => {
                tracing::info!(run_id = %status.run_id, attempt = attempt + 1, "callback delivered");
                return;
            }
            Ok(answer) => {
                let code = answer.status().as_u16();
                if (400..500).contains(&code) && code != 408 && code != 429 {
                    tracing::warn!(run_id = %status.run_id, status = code, "callback refused by its receiver: not tried again");
                    return;
                }
                format!("answered {code}")
            }
            Err(error) => error.to_string(),
        };
        tracing::warn!(run_id = %status.run_id, attempt = attempt + 1, %outcome, "callback not delivered");
    }
    tracing::error!(run_id = %status.run_id, "callback given up after every try");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allowlist is the boundary: only the exact host and port pass.
    #[test]
    fn only_an_allowed_host_and_port_is_called_back() {
        let policy = CallbackPolicy::parse(&["127.0.0.1:9000".into(), "Hooks.Example.com:443".into()]).expect("policy");
        assert!(policy.check("http://127.0.0.1:9000/done").is_ok());
        assert!(policy.check("https://hooks.example.com/x").is_ok(), "the scheme's port counts");
        for refused in ["http://127.0.0.1:9001/done", "http://localhost:9000/", "ftp://127.0.0.1:9000/", "http://user:pw@127.0.0.1:9000/", "not a url", "http://169.254.169.254/latest"] {
            let error = policy.check(refused).expect_err(refused);
            assert_eq!(error.code(), "callback_not_allowed", "{refused}");
        }
        assert!(CallbackPolicy::default().check("http://127.0.0.1:9000/").is_err(), "none is allowed by default");
        assert!(CallbackPolicy::parse(&["no-port".into()]).is_err());
    }

    #[test]
    fn the_signature_is_an_hmac_of_the_time_and_the_body() {
        let signer = Signer::new(b"k".repeat(32));
        let header = signature(&signer, 1700000000, b"{\"a\":1}");
        let expected = signer.sign_bytes(b"1700000000.{\"a\":1}");
        assert_eq!(header, format!("t=1700000000,v1={expected}"));
        assert_ne!(signature(&signer, 1700000000, b"{\"a\":2}"), header, "another body, another signature");
    }
}
