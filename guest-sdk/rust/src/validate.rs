//! The checks the host makes of a description at load (wasm/abi
//! Description.Validate), so that a test fails where the host would refuse.

use std::collections::{HashMap, HashSet};

use crate::messages::{ClassDesc, Description, RetrySettings};

/// Checks desc; the error names the first problem in the host's words.
pub fn description(desc: &Description) -> Result<(), String> {
    if desc.processor.is_empty() {
        return Err("processor has no name".into());
    }
    name(&desc.processor).map_err(|e| format!("processor name {:?}: {}", desc.processor, e))?;
    if !(1..=3).contains(&desc.kind) {
        return Err(format!("processor {}: unknown kind {}", desc.processor, desc.kind));
    }
    if desc.start > 2 {
        return Err(format!("processor {}: unknown start position {}", desc.processor, desc.start));
    }
    retry(&desc.retry).map_err(|e| format!("processor {} retry: {}", desc.processor, e))?;
    if desc.handlers.is_empty() {
        return Err(format!("processor {} has no handlers", desc.processor));
    }
    let mut seen = HashSet::new();
    for h in &desc.handlers {
        name(&h.name).map_err(|e| format!("handler name {:?}: {}", h.name, e))?;
        if !seen.insert(h.name.as_str()) {
            return Err(format!("handler {} is declared twice", h.name));
        }
        if h.event_types.is_empty() {
            return Err(format!("handler {} has no event type", h.name));
        }
        retry(&h.retry).map_err(|e| format!("handler {} retry: {}", h.name, e))?;
    }
    classes(&desc.classes)
}

fn retry(r: &RetrySettings) -> Result<(), String> {
    for (what, v) in [("initial backoff", r.initial_backoff_nanos), ("max backoff", r.max_backoff_nanos), ("timeout", r.timeout_nanos)] {
        if v < 0 {
            return Err(format!("{} {}ns is negative", what, v));
        }
    }
    Ok(())
}

/// Names of processors and handlers: letters, digits, '_' and '-', not
/// starting with a digit or '-' (ASCII letters only).
pub fn name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("empty".into());
    }
    for (i, c) in s.chars().enumerate() {
        match c {
            'a'..='z' | 'A'..='Z' | '_' => {}
            '0'..='9' | '-' if i > 0 => {}
            '0'..='9' | '-' => return Err("must start with a letter or '_'".into()),
            _ => return Err(format!("character {:?} not allowed", c)),
        }
    }
    Ok(())
}

/// The class tree: names non-empty and unique, parents declared, no cycles.
pub fn classes(cs: &[ClassDesc]) -> Result<(), String> {
    let mut parents: HashMap<&str, &str> = HashMap::new();
    for (i, c) in cs.iter().enumerate() {
        if c.name.is_empty() {
            return Err(format!("error class {} has no name", i + 1));
        }
        if parents.insert(&c.name, &c.parent).is_some() {
            return Err(format!("error class {} is declared twice", c.name));
        }
    }
    for c in cs {
        if c.parent == c.name {
            return Err(format!("error class {} is its own parent", c.name));
        }
        if !c.parent.is_empty() && !parents.contains_key(c.parent.as_str()) {
            return Err(format!("error class {} has unknown parent {} (declare {} as a class too)", c.name, c.parent, c.parent));
        }
        let mut path = vec![c.name.as_str()];
        let mut p = c.parent.as_str();
        while !p.is_empty() {
            if let Some(i) = path.iter().position(|n| *n == p) {
                path.push(p);
                return Err(format!("error class {} is its own ancestor ({})", p, path[i..].join(" -> ")));
            }
            path.push(p);
            p = parents.get(p).copied().unwrap_or("");
        }
    }
    Ok(())
}
