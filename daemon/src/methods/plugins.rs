//! `plugins.prune`: binds its params with the
//! decoder's detail in the `-32602` text, and reports the sweep of
//! [`crate::rundir::plugindirs`] in the reference's member order.

use super::Outcome;
use crate::base::gojson::text::fold_key;
use crate::base::gojson::typeerror::{value_kind, value_kind_for_int, Target, TypeError};
use crate::base::gojson::Value;
use crate::process::ProcessManager;
use crate::protocol::method::PluginsMethod;
use crate::protocol::rpc::MSG_INVALID_PARAMS;
use crate::rundir::plugindirs::{self, Layout};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The params, as the reference's `PruneParams` binds them.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct PruneParams {
    /// Accepted and never used (a hash in `keep` was still pruned on
    /// `19f30c46`).
    pub keep: Vec<String>,
    pub min_age_days: i64,
}

const STRUCT_NAME: &str = "PruneParams";
const GO_TYPE: &str = "handlers.PruneParams";

fn field_error(value: String, field: &'static str, go_type: &'static str) -> TypeError {
    TypeError {
        value,
        target: Target::Field {
            struct_name: STRUCT_NAME,
            field,
            go_type,
        },
    }
}

impl PruneParams {
    /// Go's `json.Unmarshal` into a zero `PruneParams`: absent or `null`
    /// params are the zero value; keys match exactly first, then folded;
    /// the first mismatch in input order is the error.
    pub(crate) fn bind(params: Option<&Value>) -> Result<PruneParams, TypeError> {
        let mut out = PruneParams::default();
        let members = match params {
            None | Some(Value::Null) => return Ok(out),
            Some(Value::Object(members)) => members,
            Some(other) => {
                return Err(TypeError {
                    value: value_kind(other),
                    target: Target::Value { go_type: GO_TYPE },
                })
            }
        };
        let mut first: Option<TypeError> = None;
        for (key, value) in members {
            let field = match key.as_str() {
                "keep" => "keep",
                "minAgeDays" => "minAgeDays",
                other if fold_key(other) == fold_key("keep") => "keep",
                other if fold_key(other) == fold_key("minAgeDays") => "minAgeDays",
                _ => continue,
            };
            let result = match field {
                "keep" => bind_keep(value).map(|keep| {
                    if let Some(keep) = keep {
                        out.keep = keep;
                    }
                }),
                _ => bind_int(value).map(|n| {
                    if let Some(n) = n {
                        out.min_age_days = n;
                    }
                }),
            };
            if let Err(e) = result {
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

fn bind_int(value: &Value) -> Result<Option<i64>, TypeError> {
    match value {
        Value::Null => Ok(None),
        Value::Number(literal) => crate::base::gojson::bind::parse_go_int(literal)
            .map(Some)
            .ok_or_else(|| field_error(value_kind_for_int(value), "minAgeDays", "int")),
        other => Err(field_error(value_kind_for_int(other), "minAgeDays", "int")),
    }
}

fn bind_keep(value: &Value) -> Result<Option<Vec<String>>, TypeError> {
    match value {
        Value::Null => Ok(Some(Vec::new())),
        Value::Array(items) => {
            let mut keep = Vec::with_capacity(items.len());
            let mut first = None;
            for item in items {
                match item {
                    Value::String(s) => keep.push(s.clone()),
                    Value::Null => keep.push(String::new()),
                    other => {
                        first.get_or_insert_with(|| field_error(value_kind(other), "keep", "string"));
                    }
                }
            }
            first.map_or(Ok(Some(keep)), Err)
        }
        other => Err(field_error(value_kind(other), "keep", "[]string")),
    }
}

/// The reply, members in the reference's order.
#[derive(Debug, Serialize)]
struct PruneResult {
    root: String,
    pruned: Vec<String>,
    #[serde(rename = "prunedLegacy")]
    pruned_legacy: Vec<String>,
    #[serde(rename = "staleArchives")]
    stale_archives: u64,
    kept: u64,
    live: u64,
    young: u64,
    legacy: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    skipped: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<String>,
    #[serde(rename = "minAgeDays")]
    min_age_days: i64,
}

impl PruneResult {
    /// A reply for `root` that counts nothing yet: the sweep fills it in.
    fn nothing_done(root: String, min_age_days: i64) -> PruneResult {
        PruneResult {
            root,
            pruned: Vec::new(),
            pruned_legacy: Vec::new(),
            stale_archives: 0,
            kept: 0,
            live: 0,
            young: 0,
            legacy: String::new(),
            skipped: String::new(),
            errors: Vec::new(),
            min_age_days,
        }
    }
}

pub(crate) async fn handle(
    method: PluginsMethod,
    params: Option<&Value>,
    socket: &Path,
    processes: &ProcessManager,
) -> Outcome {
    match method {
        PluginsMethod::Prune => {
            let params = match PruneParams::bind(params) {
                Ok(p) => p,
                Err(e) => return Outcome::invalid_params(format!("{MSG_INVALID_PARAMS}: {e}")),
            };
            prune(params, socket, processes).await
        }
    }
}

async fn prune(params: PruneParams, socket: &Path, processes: &ProcessManager) -> Outcome {
    let Some(layout) = Layout::of(socket) else {
        return Outcome::ok(&PruneResult {
            legacy: format!("skipped: {}", plugindirs::NOT_RUN_SHAPED),
            skipped: plugindirs::NOT_RUN_SHAPED.to_string(),
            ..PruneResult::nothing_done(String::new(), 0)
        });
    };
    let min_age_days = params
        .min_age_days
        .clamp(plugindirs::MIN_AGE_DAYS, plugindirs::MAX_AGE_DAYS);
    let window = Duration::from_secs(u64::try_from(min_age_days).unwrap_or(0) * 86_400);
    let cutoff = SystemTime::now().checked_sub(window).unwrap_or(SystemTime::UNIX_EPOCH);
    let live = processes.live_plugin_hashes();
    let sibling = plugindirs::blocking_sibling(&layout).await;
    let work = move || {
        let mut result = PruneResult::nothing_done(
            crate::base::gojson::go_lossy(layout.install_root().as_os_str().as_encoded_bytes()),
            min_age_days,
        );
        let install_root = layout.install_root();
        match plugindirs::open_root(&layout.base, &[Path::new("plugins"), Path::new(&layout.client_id)]) {
            Ok(Some(root)) => {
                let swept = plugindirs::sweep(&root, &install_root, &live, cutoff, false);
                result.pruned = swept.removed;
                result.live += swept.live;
                result.young += swept.young;
                result.errors.extend(swept.errors);
            }
            Ok(None) => {}
            Err(e) => {
                let shown = crate::base::gojson::go_lossy(install_root.as_os_str().as_encoded_bytes());
                result.errors.push(format!(
                    "{shown}: {}",
                    crate::base::goerr::path_error("open", &shown, &e)
                ));
            }
        }
        let legacy_root = layout.legacy_root();
        result.legacy = match sibling {
            Some(detail) => format!(
                "skipped: another install's daemon is running ({detail}); its sessions may use the shared legacy dirs"
            ),
            None => match plugindirs::open_root(&layout.base, &[Path::new("plugins")]) {
                Ok(Some(root)) => {
                    let swept = plugindirs::sweep(&root, &legacy_root, &live, cutoff, true);
                    result.pruned_legacy = swept.removed;
                    result.live += swept.live;
                    result.young += swept.young;
                    result.errors.extend(swept.errors);
                    "swept".to_string()
                }
                Ok(None) | Err(_) => "absent".to_string(),
            },
        };
        result
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => Outcome::ok(&result),
        Err(_) => Outcome::internal("plugins.prune failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::gojson::parse;

    fn bind(json: &str) -> Result<PruneParams, String> {
        PruneParams::bind(Some(&parse(json.as_bytes()).unwrap())).map_err(|e| e.to_string())
    }

    #[test]
    fn binds_like_encoding_json() {
        assert_eq!(bind("{}"), Ok(PruneParams::default()));
        assert_eq!(PruneParams::bind(None), Ok(PruneParams::default()));
        assert_eq!(bind("null"), Ok(PruneParams::default()));
        assert_eq!(
            bind(r#"{"MINAGEDAYS":9,"Keep":["a",null]}"#).map(|p| (p.min_age_days, p.keep)),
            Ok((9, vec!["a".into(), String::new()]))
        );
        let field = |v: &str, t: &str| {
            format!("json: cannot unmarshal {v} into Go struct field PruneParams.minAgeDays of type {t}")
        };
        assert_eq!(bind(r#"{"minAgeDays":"x"}"#), Err(field("string", "int")));
        assert_eq!(bind(r#"{"minAgeDays":1.5}"#), Err(field("number 1.5", "int")));
        assert_eq!(bind(r#"{"minAgeDays":1e3}"#), Err(field("number 1e3", "int")));
        assert_eq!(bind(r#"{"minAgeDays":true}"#), Err(field("bool", "int")));
        assert_eq!(bind(r#"{"minAgeDays":[]}"#), Err(field("array", "int")));
        assert_eq!(
            bind(r#"{"keep":"a","minAgeDays":"x"}"#),
            Err("json: cannot unmarshal string into Go struct field PruneParams.keep of type []string".into())
        );
        assert_eq!(
            bind(r#"{"keep":[1]}"#),
            Err("json: cannot unmarshal number into Go struct field PruneParams.keep of type string".into())
        );
        for (json, kind) in [("[]", "array"), ("\"x\"", "string"), ("7", "number"), ("false", "bool")] {
            assert_eq!(
                bind(json),
                Err(format!(
                    "json: cannot unmarshal {kind} into Go value of type handlers.PruneParams"
                ))
            );
        }
    }
}
