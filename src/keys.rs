//! Scenario keys and the errors that name them: the file, the line, the
//! key, the value given and what was expected. A leaf (std and toml only),
//! shared by `scenario` and `workload`.

use std::fmt;

use toml::de::{DeTable, DeValue};

/// One step of a key path: a table key or an array index.
#[derive(Clone, Debug, PartialEq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A dotted key path such as `workload[2].bytes`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyPath(pub Vec<Seg>);

impl KeyPath {
    pub fn root() -> Self {
        KeyPath(Vec::new())
    }
    pub fn key(&self, k: &str) -> KeyPath {
        let mut v = self.0.clone();
        v.push(Seg::Key(k.to_string()));
        KeyPath(v)
    }
    pub fn index(&self, i: usize) -> KeyPath {
        let mut v = self.0.clone();
        v.push(Seg::Index(i));
        KeyPath(v)
    }
    /// Parses the `--set` form: `workload.0.bytes` or `workload[0].bytes`.
    /// Reads a key as `--set` takes it: dotted names, with list indices
    /// either as `[N]` or as a dotted number (`workload[0].bytes`,
    /// `workload.0.bytes`). Unbalanced or empty brackets, empty names and
    /// stray characters after a bracket are refused, so a mistyped key is
    /// never applied as some other key.
    pub fn parse_dotted(s: &str) -> Result<KeyPath, String> {
        let bad = |why: &str| Err(format!("\"{s}\" is not a key: {why}"));
        let mut segs = Vec::new();
        for part in s.split('.') {
            let (name, mut rest) = match part.find('[') {
                Some(i) => (&part[..i], &part[i..]),
                None => (part, ""),
            };
            if name.contains(']') {
                return bad("a ']' without its '['");
            }
            if name.is_empty() && (rest.is_empty() || segs.is_empty()) {
                return bad("an empty name (two dots, or a dot at an end)");
            }
            if !name.is_empty() {
                match name.parse::<usize>() {
                    Ok(i) => segs.push(Seg::Index(i)),
                    Err(_) => segs.push(Seg::Key(name.to_string())),
                }
            }
            while !rest.is_empty() {
                let Some(body) = rest.strip_prefix('[') else {
                    return bad("characters after ']' that are not '[' or '.'");
                };
                let Some(close) = body.find(']') else {
                    return bad("a '[' without its ']'");
                };
                let idx = &body[..close];
                if idx.contains('[') {
                    return bad("a '[' inside brackets");
                }
                if idx.is_empty() {
                    return bad("empty brackets; expected a list index such as [0]");
                }
                match idx.parse::<usize>() {
                    Ok(i) => segs.push(Seg::Index(i)),
                    Err(_) => segs.push(Seg::Key(idx.to_string())),
                }
                rest = &body[close + 1..];
            }
        }
        Ok(KeyPath(segs))
    }

    pub fn starts_with(&self, other: &KeyPath) -> bool {
        self.0.len() >= other.0.len() && self.0[..other.0.len()] == other.0[..]
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            match s {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A problem with one key of a scenario, before the file name and line are
/// known.
#[derive(Debug, Clone)]
pub struct KeyError {
    pub path: KeyPath,
    pub message: String,
}

impl KeyError {
    pub fn new(path: &KeyPath, message: impl Into<String>) -> Self {
        KeyError {
            path: path.clone(),
            message: message.into(),
        }
    }
}

/// An invalid scenario, located in its file.
#[derive(Debug, Clone)]
pub struct ScenarioError {
    pub file: String,
    pub line: Option<usize>,
    /// Empty for errors that are not about one key (TOML syntax).
    pub key: String,
    pub message: String,
    /// The key's value came from `--set` rather than from the file.
    pub from_set: bool,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.from_set {
            write!(f, " (--set)")?;
        } else if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ScenarioError {}

/// The 1-based line holding byte offset `at` (counted in bytes, so an
/// offset inside a multi-byte character cannot panic).
pub fn line_at(text: &str, at: usize) -> usize {
    let end = at.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Finds the 1-based line of the deepest part of `path` present in the
/// document text.
pub fn line_of(text: &str, path: &KeyPath) -> Option<usize> {
    let doc = DeTable::parse(text).ok()?;
    let mut span: Option<std::ops::Range<usize>> = None;
    let mut table: Option<&DeTable> = Some(doc.get_ref());
    let mut value: Option<&DeValue> = None;
    for seg in &path.0 {
        match seg {
            Seg::Key(k) => {
                let t = match (table, value) {
                    (Some(t), _) => t,
                    (None, Some(DeValue::Table(t))) => t,
                    _ => break,
                };
                let Some((key, v)) = t
                    .iter()
                    .find(|(key, _)| key.get_ref().as_ref() == k.as_str())
                else {
                    break;
                };
                span = Some(key.span());
                value = Some(v.get_ref());
                table = None;
            }
            Seg::Index(i) => {
                let Some(DeValue::Array(arr)) = value else {
                    break;
                };
                let Some(v) = arr.get(*i) else { break };
                span = Some(v.span());
                value = Some(v.get_ref());
                table = None;
            }
        }
    }
    let start = span?.start;
    Some(line_at(text, start))
}

/// A warning about a scenario that is valid but probably not what was
/// meant: the key it concerns and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub key: String,
    pub message: String,
}
