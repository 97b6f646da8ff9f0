//! Backend tools: run by the runtime inside the turn. Failures are data the
//! model reads (`{"success": false, "error", "error_code"}`), never a failed turn.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

use crate::model::ContentPart;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendTool {
    GetTime,
    LookAtScreen,
}

/// What a backend tool gives back: the stored output, and content shown to the
/// model with it for this turn only (a screenshot is never stored).
#[derive(Clone, Debug, PartialEq)]
pub struct BackendOutput {
    pub output: Value,
    pub success: bool,
    pub live_content: Vec<ContentPart>,
}

impl BackendTool {
    pub const ALL: [BackendTool; 2] = [BackendTool::GetTime, BackendTool::LookAtScreen];

    pub fn name(self) -> &'static str {
        match self {
            BackendTool::GetTime => "get_time",
            BackendTool::LookAtScreen => "look_at_screen",
        }
    }

    pub fn from_name(name: &str) -> Option<BackendTool> {
        BackendTool::ALL
            .into_iter()
            .find(|tool| tool.name() == name)
    }

    pub fn description(self) -> &'static str {
        match self {
            BackendTool::GetTime => "Get the current date and time (UTC).",
            BackendTool::LookAtScreen => {
                "Look at the screenshot the host attached to this turn. Call it when you need to see the screen."
            }
        }
    }

    /// Built once: every turn offers it, and a provider request only reads it.
    pub fn parameters(self) -> Arc<Value> {
        static NO_ARGUMENTS: OnceLock<Arc<Value>> = OnceLock::new();
        NO_ARGUMENTS
            .get_or_init(|| {
                Arc::new(json!({"type": "object", "properties": {}, "additionalProperties": false}))
            })
            .clone()
    }

    /// Runs the tool. `screenshot` is the turn's latest screenshot data URI.
    pub fn run(self, screenshot: Option<&str>) -> BackendOutput {
        match self {
            BackendTool::GetTime => {
                let unix = crate::clock::now_millis() / 1000;
                BackendOutput {
                    output: json!({"success": true, "utc": format_utc(unix), "unix": unix}),
                    success: true,
                    live_content: Vec::new(),
                }
            }
            BackendTool::LookAtScreen => {
                match screenshot.and_then(crate::model::MediaSource::from_data_uri) {
                    Some(source) => BackendOutput {
                        output: json!({"success": true, "screenshot": "[screenshot shown to the model; not stored]"}),
                        success: true,
                        live_content: vec![ContentPart::Image(source)],
                    },
                    None => BackendOutput {
                        output: json!({"success": false, "error": "No screenshot is available in this turn.", "error_code": "no_screenshot"}),
                        success: false,
                        live_content: Vec::new(),
                    },
                }
            }
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time, without a calendar crate
/// (days-to-civil conversion from Howard Hinnant's date algorithms).
pub fn format_utc(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let seconds_of_day = unix_seconds % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + if month <= 2 { 1 } else { 0 };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        seconds_of_day / 3600,
        (seconds_of_day / 60) % 60,
        seconds_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting_matches_known_dates() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_757_066_400), "2025-09-05T10:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
    }
}
