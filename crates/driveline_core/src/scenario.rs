#![doc = include_str!("scenario_format.md")]

use crate::Signal;

use crate::model::{ElementSpec, NetworkSpec};
use crate::network::{BuildError, Network};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Scenario name (the MSL example name for the shipped ones).
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// Default end time, s (> 0).
    pub t_end: f64,
    /// Suggested step, s (> 0), if any.
    #[serde(default)]
    pub dt: Option<f64>,
    /// Named signals referenced by `Ref("name")`.
    #[serde(default)]
    pub signals: BTreeMap<String, Signal>,
    /// The elements.
    pub elements: Vec<ElementSpec>,
    /// Flange connections.
    pub connections: Vec<(String, String)>,
}

/// A scenario error with its position in the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}")]
pub struct ScenarioError {
    /// File name as given.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong and what is allowed.
    pub message: String,
}

pub(crate) fn ron_options() -> ron::Options {
    ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
}

/// Position (1-based line, col) of the first match of `needle` at or after byte `from`.
pub(crate) fn position_of(text: &str, needle: &str, from: usize) -> Option<(usize, usize, usize)> {
    let at = text[from.min(text.len())..].find(needle)? + from.min(text.len());
    let line = text[..at].matches('\n').count() + 1;
    let col = at - text[..at].rfind('\n').map(|p| p + 1).unwrap_or(0) + 1;
    Some((line, col, at))
}

impl Scenario {
    /// Parses scenario text; `file` names it in error messages.
    pub fn parse(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
        let sc: Scenario = ron_options().from_str(text).map_err(|e| ScenarioError {
            file: file.to_string(),
            line: e.span.start.line,
            col: e.span.start.col,
            message: explain_ron(&e.code.to_string()),
        })?;
        Ok(sc)
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let (file, text) = read(path)?;
        Scenario::parse(&text, &file)
    }

    /// Reads, parses, validates and builds a file in one go.
    pub fn load_network(path: &Path) -> Result<(Scenario, Network), ScenarioError> {
        let (file, text) = read(path)?;
        let sc = Scenario::parse(&text, &file)?;
        let net = sc.build(&text, &file)?;
        Ok((sc, net))
    }

    /// Validates the scenario and builds its network. `text` and `file` are used to place
    /// errors (pass the source the scenario was parsed from).
    pub fn build(&self, text: &str, file: &str) -> Result<Network, ScenarioError> {
        let err_at = |needle: Option<String>, key: Option<&str>, message: String| {
            let mut pos = (1, 1);
            if let Some(n) = needle
                && let Some((l, c, at)) = position_of(text, &n, 0)
            {
                pos = (l, c);
                // A parameter key inside this element: search up to the next `name:`.
                let end = text[at + n.len()..].find("name:").map(|e| e + at + n.len()).unwrap_or(text.len());
                if let Some(k) = key
                    && let Some((l2, c2, at2)) = position_of(text, &format!("{k}:"), at)
                    && at2 < end
                {
                    pos = (l2, c2);
                }
            }
            ScenarioError { file: file.to_string(), line: pos.0, col: pos.1, message }
        };
        if !(self.t_end.is_finite() && self.t_end > 0.0) {
            return Err(err_at(
                Some("t_end".into()),
                None,
                format!("`t_end` is {}; it must be a finite time > 0 s", self.t_end),
            ));
        }
        if let Some(dt) = self.dt
            && !(dt.is_finite() && dt > 0.0)
        {
            return Err(err_at(Some("dt:".into()), None, format!("`dt` is {dt}; it must be a finite step > 0 s")));
        }
        for (name, s) in &self.signals {
            let resolved = s
                .resolve(&|n| self.signals.get(n).cloned())
                .map_err(|m| err_at(Some(format!("\"{name}\"")), None, format!("signal '{name}': {m}")))?;
            resolved
                .validate()
                .map_err(|m| err_at(Some(format!("\"{name}\"")), None, format!("signal '{name}': {m}")))?;
        }
        let spec = self.resolve_elements(&err_at)?;
        Network::build(&spec).map_err(|e| {
            let (needle, key) = locate_build_error(&e);
            err_at(needle, key, e.to_string())
        })
    }

    /// The network with every signal reference resolved, for callers without the source text
    /// (errors then point at line 1).
    pub fn resolved_spec(&self) -> Result<NetworkSpec, ScenarioError> {
        let err = |_n: Option<String>, _k: Option<&str>, message: String| ScenarioError {
            file: self.name.clone(),
            line: 1,
            col: 1,
            message,
        };
        self.resolve_elements(&err)
    }

    fn resolve_elements(
        &self,
        err_at: &dyn Fn(Option<String>, Option<&str>, String) -> ScenarioError,
    ) -> Result<NetworkSpec, ScenarioError> {
        let mut elements = self.elements.clone();
        for e in &mut elements {
            let name = e.name.clone();
            let fix = |s: &mut Signal| -> Result<(), ScenarioError> {
                *s = s
                    .resolve(&|n| self.signals.get(n).cloned())
                    .map_err(|m| err_at(Some(format!("\"{name}\"")), None, format!("'{name}': {m}")))?;
                Ok(())
            };
            for sig in e.kind.signals_mut() {
                fix(sig)?;
            }
        }
        Ok(NetworkSpec { elements, connections: self.connections.clone() })
    }
}

/// The file's display name and text.
pub(crate) fn read(path: &Path) -> Result<(String, String), ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: file.clone(),
        line: 1,
        col: 1,
        message: format!("cannot read the file: {e}"),
    })?;
    Ok((file, text))
}

/// Parameter names a build error can point at.
const PARAMETER_KEYS: [&str; 31] = [
    "J",
    "S",
    "D",
    "c",
    "d",
    "b",
    "ratio",
    "peak",
    "cgeo",
    "fn_max",
    "mu_pos",
    "tau_pos",
    "w_nominal",
    "v_nominal",
    "radius",
    "m",
    "loss_table",
    "shift_time",
    "phi_start",
    "w_start",
    "phi_rel_start",
    "w_rel_start",
    "C",
    "G",
    "T",
    "T_start",
    "TRef",
    "T_ref",
    "alpha20",
    "alpha",
    "Q_flow",
];

/// Where in the file a build error belongs: an element name and maybe a parameter key.
fn locate_build_error(e: &BuildError) -> (Option<String>, Option<&'static str>) {
    let quoted = |s: &str| Some(format!("\"{s}\""));
    match e {
        BuildError::DuplicateName(n) | BuildError::Disconnected(n) | BuildError::ConflictingFixed(n) => {
            (quoted(n), None)
        }
        BuildError::UnknownElement { flange, .. } | BuildError::BadFlangeRef(flange) => (quoted(flange), None),
        BuildError::UnknownFlange { element, flange, .. } => (Some(format!("\"{element}.{flange}\"")), None),
        BuildError::DomainMismatch { a, .. } | BuildError::HeatPortMismatch { a, .. } => (quoted(a), None),
        BuildError::DanglingFlange { element, .. } | BuildError::SupportMismatch { element, .. } => {
            (quoted(element), None)
        }
        BuildError::Parameter { element, message } => {
            let key = message.split('`').nth(1).and_then(|k| PARAMETER_KEYS.into_iter().find(|c| *c == k));
            (quoted(element), key)
        }
        BuildError::Signal { element, .. } => (quoted(element), None),
        _ => (Some("elements".into()), None),
    }
}

fn explain_ron(code: &str) -> String {
    format!("{code} (see the scenario format in the driveline_core::scenario docs)")
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"Scenario(
    name: "spin",
    t_end: 1.0,
    elements: [
        (name: "J", kind: Inertia(J: 2.0, phi_start: 0.0, w_start: 1.0)),
        (name: "src", kind: ConstantTorque(tau_constant: 4.0)),
    ],
    connections: [("src.flange", "J.flange_a")],
)"#;

    #[test]
    fn parses_and_builds() {
        let sc = Scenario::parse(OK, "ok.ron").unwrap();
        let net = sc.build(OK, "ok.ron").unwrap();
        assert_eq!(net.n_dof, 1);
    }

    #[test]
    fn negative_inertia_is_placed_at_its_key() {
        let bad = OK.replace("J: 2.0", "J: -2.0");
        let sc = Scenario::parse(&bad, "bad.ron").unwrap();
        let e = sc.build(&bad, "bad.ron").unwrap_err();
        assert_eq!((e.line, e.col), (5, 35), "{e}");
        assert!(e.message.contains("at least 1e-12 kg m^2"), "{e}");
    }

    #[test]
    fn every_example_in_the_format_docs_parses() {
        // The element and signal examples of scenario_format.md, one per line.
        let doc = include_str!("scenario_format.md");
        let mut checked = 0;
        for block in doc.split("```ron").skip(1) {
            let block = block.split("```").next().unwrap_or("");
            if block.contains("Scenario(") {
                continue;
            }
            for line in block.lines().map(|l| l.split("//").next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
                let as_kind: Result<crate::ElementKind, _> = ron_options().from_str(line);
                let as_signal: Result<crate::Signal, _> = ron_options().from_str(line);
                assert!(as_kind.is_ok() || as_signal.is_ok(), "doc example does not parse: {line}");
                checked += 1;
            }
        }
        assert!(checked > 30, "{checked}");
    }

    #[test]
    fn syntax_error_has_position() {
        let e = Scenario::parse("Scenario(name: \"x\", t_end: ,)", "s.ron").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.col > 1);
    }
}
