//! `acs-proxy pins show|diff|approve`: the review workflow for the pin file.
//!
//! `diff` compares the pins with the current definitions, read from the
//! config's upstreams (spawned and listed) or from an audit log recorded
//! with `record_content = true` (its last `agbom/snapshot` and the
//! `agbom/changed` entries after it), and shows what changed and what the
//! poisoning scan finds; `approve` writes the current definitions into the
//! pin file, all of them or one tool. Definitions taken from an audit log
//! carry only their digest and description, so their pins have no
//! `definition` to diff against later.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{json, Value};

use super::error::IntegrityError;
use super::pins::{digest, Pin, PinFile};
use super::rules::RuleSet;
use super::scan::{self, ScanContext};
use super::section::Section;
use super::{diff, fetch};
use crate::config::{Config, UpstreamConfig};

/// The `pins` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum PinsCommand {
    /// List the pinned definitions.
    Show(ReviewArgs),
    /// Show how the current definitions differ from the pins (exit 1 when they do).
    Diff(ReviewArgs),
    /// Write the current definitions into the pin file.
    Approve(ReviewArgs),
}

/// What every `pins` subcommand takes.
#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// The configuration file (its `[integrity] pins` and upstreams).
    #[arg(long, short, env = "ACS_PROXY_CONFIG")]
    pub config: PathBuf,
    /// Only this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only this upstream (by `[[upstream]] name`).
    #[arg(long)]
    pub upstream: Option<String>,
    /// Read the current definitions from this audit log instead of the upstreams.
    #[arg(long, value_name = "LOG")]
    pub from_audit: Option<PathBuf>,
    /// `approve`: mark the pins as reviewed, accepting what the scan finds.
    #[arg(long)]
    pub reviewed: bool,
}

/// One definition as currently served.
#[derive(Debug, Clone)]
struct Current {
    digest: String,
    /// The whole definition, or (from an audit log) its name and description.
    definition: Value,
    /// Whether `definition` is whole, so it can be kept in the pin.
    whole: bool,
}

/// Current definitions of one upstream, by section and name.
type Served = BTreeMap<Section, BTreeMap<String, Current>>;

/// Runs a `pins` subcommand; prints to stdout, errors to stderr.
pub fn run(command: &PinsCommand) -> ExitCode {
    let outcome = match command {
        PinsCommand::Show(args) => show(args).map(|text| (text, true)),
        PinsCommand::Diff(args) => diff_command(args),
        PinsCommand::Approve(args) => approve(args).map(|text| (text, true)),
    };
    match outcome {
        Ok((text, same)) => {
            print!("{text}");
            if same {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(err) => {
            eprintln!("acs-proxy: {err}");
            ExitCode::from(2)
        }
    }
}

fn load(args: &ReviewArgs) -> Result<(Config, PinFile), IntegrityError> {
    let config =
        Config::load(&args.config).map_err(|err| IntegrityError::Review(err.to_string()))?;
    let pins = PinFile::load(&config.integrity.pins)?;
    Ok((config, pins))
}

fn show(args: &ReviewArgs) -> Result<String, IntegrityError> {
    let (config, pins) = load(args)?;
    let mut out = format!("{}\n", config.integrity.pins.display());
    for (upstream, sections) in &pins.upstreams {
        if args.upstream.as_ref().is_some_and(|only| only != upstream) {
            continue;
        }
        out.push_str(&format!("upstream {upstream}:\n"));
        for section in Section::ALL {
            for (name, pin) in sections.section(section) {
                if !wanted(args, section, name) {
                    continue;
                }
                let reviewed = if pin.reviewed { " reviewed" } else { "" };
                out.push_str(&format!(
                    "  {} {name} sha256 {}{reviewed}\n",
                    section.noun(),
                    pin.sha256
                ));
            }
        }
    }
    Ok(out)
}

fn diff_command(args: &ReviewArgs) -> Result<(String, bool), IntegrityError> {
    let (config, pins) = load(args)?;
    let rules = RuleSet::new(&config.integrity.rules)?;
    let mut out = String::new();
    let mut same = true;
    for (upstream, served) in current(args, &config)? {
        out.push_str(&format!("upstream {upstream}:\n"));
        let foreign: Vec<(String, String)> = pins
            .foreign_tools(&upstream)
            .map(|(u, t)| (u.to_owned(), t.to_owned()))
            .collect();
        let context = ScanContext {
            rules: &rules,
            max_description_chars: config.integrity.max_description_chars,
            foreign_tools: &foreign,
        };
        for section in Section::ALL {
            let listed = served.get(&section).cloned().unwrap_or_default();
            let pinned = pins
                .upstreams
                .get(&upstream)
                .map(|p| p.section(section).clone())
                .unwrap_or_default();
            for (name, now) in &listed {
                if !wanted(args, section, name) {
                    continue;
                }
                let noun = section.noun();
                match pinned.get(name) {
                    Some(pin) if pin.sha256 == now.digest => {}
                    Some(pin) => {
                        same = false;
                        out.push_str(&format!(
                            "  {noun} {name}: changed (pinned sha256 {}, listed sha256 {})\n",
                            pin.sha256, now.digest
                        ));
                        let before = pin.definition.clone().unwrap_or_else(|| json!({}));
                        for line in diff::describe(&before, &now.definition) {
                            out.push_str(&format!("  {line}\n"));
                        }
                    }
                    None => {
                        same = false;
                        out.push_str(&format!(
                            "  {noun} {name}: not pinned (sha256 {})\n",
                            now.digest
                        ));
                    }
                }
                let reviewed = pinned
                    .get(name)
                    .is_some_and(|p| p.reviewed && p.sha256 == now.digest);
                for finding in scan::scan(&now.definition, &context) {
                    let note = if reviewed { " (reviewed)" } else { "" };
                    out.push_str(&format!(
                        "  {noun} {name}: finding at {}: rule {} ({}) matched {:?}{note}\n",
                        finding.location,
                        finding.rule,
                        finding.kind.as_str(),
                        finding.excerpt
                    ));
                }
            }
            for name in pinned.keys() {
                if wanted(args, section, name) && !listed.contains_key(name) {
                    same = false;
                    out.push_str(&format!(
                        "  {} {name}: pinned but no longer listed\n",
                        section.noun()
                    ));
                }
            }
        }
    }
    if same {
        out.push_str("no differences from the pins\n");
    }
    Ok((out, same))
}

fn approve(args: &ReviewArgs) -> Result<String, IntegrityError> {
    let (config, mut pins) = load(args)?;
    let mut count = 0;
    for (upstream, served) in current(args, &config)? {
        for (section, items) in served {
            for (name, now) in items {
                if !wanted(args, section, &name) {
                    continue;
                }
                let pin = Pin {
                    sha256: now.digest.clone(),
                    reviewed: args.reviewed,
                    definition: now.whole.then(|| now.definition.clone()),
                };
                pins.set_pin(&upstream, section, &name, pin);
                count += 1;
            }
        }
    }
    if count == 0 {
        return Err(IntegrityError::Review(
            "nothing to approve: no matching definition is served".into(),
        ));
    }
    pins.save(&config.integrity.pins)?;
    Ok(format!(
        "pinned {count} definition(s) in {}\n",
        config.integrity.pins.display()
    ))
}

/// Whether `--tool` lets this definition through.
fn wanted(args: &ReviewArgs, section: Section, name: &str) -> bool {
    match &args.tool {
        Some(tool) => section == Section::Tools && tool == name,
        None => true,
    }
}

/// The current definitions of each upstream the review covers.
fn current(args: &ReviewArgs, config: &Config) -> Result<Vec<(String, Served)>, IntegrityError> {
    let upstreams: Vec<&UpstreamConfig> = config
        .upstreams
        .iter()
        .filter(|u| args.upstream.as_ref().is_none_or(|only| *only == u.name))
        .collect();
    if upstreams.is_empty() {
        return Err(IntegrityError::Review(
            "no such upstream in the config".into(),
        ));
    }
    if let Some(log) = &args.from_audit {
        let [upstream] = upstreams.as_slice() else {
            return Err(IntegrityError::Review(
                "--from-audit needs --upstream NAME when the config has several upstreams".into(),
            ));
        };
        return Ok(vec![(upstream.name.clone(), from_audit(log)?)]);
    }
    upstreams
        .into_iter()
        .map(|upstream| {
            let served = fetch::fetch(upstream)?
                .into_iter()
                .map(|(section, items)| (section, whole(items)))
                .collect();
            Ok((upstream.name.clone(), served))
        })
        .collect()
}

fn whole(items: Vec<Value>) -> BTreeMap<String, Current> {
    items
        .into_iter()
        .filter_map(|item| {
            let name = Section::item_name(&item)?.to_owned();
            let current = Current {
                digest: digest(&item),
                definition: item,
                whole: true,
            };
            Some((name, current))
        })
        .collect()
}

/// The tools and prompts as an audit log last recorded them.
fn from_audit(path: &Path) -> Result<Served, IntegrityError> {
    let text = std::fs::read_to_string(path).map_err(|err| IntegrityError::AuditLog {
        path: path.to_owned(),
        message: err.to_string(),
    })?;
    let mut served = Served::new();
    let mut found = false;
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let payload = &entry["hook_params"]["payload"];
        match entry["step_type"].as_str() {
            Some("agbom/snapshot") if payload.is_object() => {
                found = true;
                served.clear();
                for component in payload["components"].as_array().into_iter().flatten() {
                    apply_component(&mut served, component);
                }
            }
            Some("agbom/changed") if payload.is_object() => {
                for component in payload["removed"].as_array().into_iter().flatten() {
                    if let (Some(section), Some(name)) =
                        (component_section(component), component["name"].as_str())
                    {
                        served.entry(section).or_default().remove(name);
                    }
                }
                for key in ["added", "changed"] {
                    for component in payload[key].as_array().into_iter().flatten() {
                        apply_component(&mut served, component);
                    }
                }
            }
            _ => {}
        }
    }
    if !found {
        return Err(IntegrityError::AuditLog {
            path: path.to_owned(),
            message: "no agbom/snapshot entry with content (record it with [audit] record_content = true)".into(),
        });
    }
    Ok(served)
}

fn component_section(component: &Value) -> Option<Section> {
    match component["type"].as_str()? {
        "tool" => Some(Section::Tools),
        "agent_capability" => Some(Section::Prompts),
        _ => None,
    }
}

fn apply_component(served: &mut Served, component: &Value) {
    let (Some(section), Some(name), Some(digest)) = (
        component_section(component),
        component["name"].as_str(),
        component["definition_digest"].as_str(),
    ) else {
        return;
    };
    let mut definition = json!({ "name": name });
    if let Some(description) = component.get("description") {
        definition["description"] = description.clone();
    }
    served.entry(section).or_default().insert(
        name.to_owned(),
        Current {
            digest: digest.to_owned(),
            definition,
            whole: false,
        },
    );
}
