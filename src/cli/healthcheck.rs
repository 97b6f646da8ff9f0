//! `assistant-runtime healthcheck`: asks this machine's runtime for `/readyz`
//! and exits 0 when it answers 200, 1 otherwise. For a container's
//! HEALTHCHECK, since the slim image has no curl.

use std::time::Duration;

use crate::settings::Settings;

/// Bounds the whole check, so a hung server fails it instead of stalling it.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the runtime the settings describe is ready; the reason on stderr.
pub async fn run(settings: &Settings) -> bool {
    let url = readyz_url(&settings.host, settings.port);
    let client = match reqwest::Client::builder().timeout(CHECK_TIMEOUT).build() {
        Ok(client) => client,
        Err(error) => {
            eprintln!("healthcheck: {error}");
            return false;
        }
    };
    match client.get(&url).send().await {
        Ok(response) if response.status().is_success() => true,
        Ok(response) => {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            eprintln!("healthcheck: {url} answered {status}: {body}");
            false
        }
        Err(error) => {
            eprintln!("healthcheck: {url}: {error}");
            false
        }
    }
}

/// A wildcard listen address is asked on loopback.
fn readyz_url(host: &str, port: u16) -> String {
    let host = match host {
        "0.0.0.0" | "" => "127.0.0.1",
        "::" | "[::]" => "[::1]",
        other if other.contains(':') && !other.starts_with('[') => {
            return format!("http://[{other}]:{port}/readyz")
        }
        other => other,
    };
    format!("http://{host}:{port}/readyz")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_addresses_are_asked_on_loopback() {
        assert_eq!(readyz_url("0.0.0.0", 7100), "http://127.0.0.1:7100/readyz");
        assert_eq!(readyz_url("::", 80), "http://[::1]:80/readyz");
        assert_eq!(readyz_url("::1", 80), "http://[::1]:80/readyz");
        assert_eq!(readyz_url("localhost", 1), "http://localhost:1/readyz");
    }
}
