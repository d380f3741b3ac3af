//! "How will the host classify this failure?", answered by the host's rules
//! (retry.Classify) for what a module decides: the class chain read by the
//! module's declared tree (the nearest declared class wins), the handler's
//! lists (a handler's list replaces its processor's), then the kind the
//! guest reported, then the builtin defaults. The operator's classifier
//! rules are the host's configuration and are not known here.

use std::collections::HashMap;

use crate::messages::{Description, Failure, FailureKind};

/// What a failure is taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Retried within the budget.
    Recoverable,
    /// Parks the aggregate at once.
    Unrecoverable,
    /// Pauses the partition, spending no budget.
    Systemic,
    /// Retried no sooner than asked.
    Backpressure,
}

/// The outcome of classify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    /// What decided, in the host's words ("handler unrecoverable: UnknownBuyer").
    pub reason: String,
    /// The chain the failure is classified by, nearest first.
    pub chain: Vec<String>,
    /// Names in the chain the module does not declare (berth.* left out).
    pub undeclared: Vec<String>,
}

/// The chain a failure sent as `sent` is classified by, and its undeclared
/// names: at the first declared class the rest of the sent chain is
/// replaced by that class's ancestors from the tree (retry.ClassTree.Resolve).
pub fn resolve(desc: &Description, sent: &[String]) -> (Vec<String>, Vec<String>) {
    let parents: HashMap<&str, &str> = desc.classes.iter().map(|c| (c.name.as_str(), c.parent.as_str())).collect();
    let (mut chain, mut undeclared): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for c in sent {
        if parents.contains_key(c.as_str()) {
            let mut p = c.as_str();
            while !p.is_empty() && !chain.iter().any(|k| k == p) {
                chain.push(p.to_string());
                p = parents.get(p).copied().unwrap_or("");
            }
            return (chain, undeclared);
        }
        if !chain.contains(c) {
            chain.push(c.clone());
            if !c.starts_with("berth.") {
                undeclared.push(c.clone());
            }
        }
    }
    (chain, undeclared)
}

/// How the host classifies failure f of the handler named handler of the
/// module desc describes.
pub fn classify(desc: &Description, handler: &str, f: &Failure) -> Decision {
    let (chain, undeclared) = resolve(desc, &f.classes);
    let h = desc.handlers.iter().find(|h| h.name == handler);
    let list = |own: Option<&Vec<String>>, proc: &Vec<String>| match own {
        Some(l) if !l.is_empty() => l.clone(),
        _ => proc.clone(),
    };
    let unrecoverable = list(h.map(|h| &h.retry.unrecoverable), &desc.retry.unrecoverable);
    let recoverable = list(h.map(|h| &h.retry.recoverable), &desc.retry.recoverable);
    let decide = |verdict, reason: String| Decision { verdict, reason, chain: chain.clone(), undeclared: undeclared.clone() };
    for c in &chain {
        if unrecoverable.contains(c) {
            return decide(Verdict::Unrecoverable, format!("handler unrecoverable: {}", c));
        }
        if recoverable.contains(c) {
            return decide(Verdict::Recoverable, format!("handler recoverable: {}", c));
        }
    }
    match f.kind {
        FailureKind::Systemic => return decide(Verdict::Systemic, "guest reported systemic".into()),
        FailureKind::Backpressure => return decide(Verdict::Backpressure, "guest reported backpressure".into()),
        FailureKind::Unspecified => {}
    }
    if chain.iter().any(|c| c == "berth.ConnectionRefused") {
        return decide(Verdict::Systemic, "builtin: berth.ConnectionRefused".into());
    }
    for c in &chain {
        if ["berth.Timeout", "berth.Trap", "berth.MemoryExceeded", "berth.Panic"].contains(&c.as_str()) {
            return decide(Verdict::Recoverable, format!("builtin: {}", c));
        }
    }
    decide(Verdict::Recoverable, "default".into())
}

impl super::Spec {
    /// How the host classifies the failure of then (None if it succeeded).
    pub fn classify(&self, then: &super::Then) -> Option<Decision> {
        let f = then.result.failure.as_ref()?;
        let handler = then.subscription.split_once('.').map_or("", |(_, h)| h);
        Some(classify(&self.processor.describe(), handler, f))
    }
}
