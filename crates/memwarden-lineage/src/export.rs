//! Audit export: the crate's own JSON ([`AuditTrail`]) and W3C PROV-JSON ([`prov_json`]).
//!
//! Neither contains memory text: an audit trail must be shareable with an auditor who may not
//! read the memories themselves, and an erased record must leave no copy of what it said.
//!
//! PROV mapping:
//!
//! | memwarden | PROV |
//! | --- | --- |
//! | record (resource, message, memory, claim) | `entity`, `prov:type` `mw:<kind>` |
//! | principal (user, agent, tool, source) | `agent` (`prov:Person` for users, `prov:SoftwareAgent` otherwise) |
//! | the write that created a record | `activity` `mwa:write-<id>`; `wasGeneratedBy`, `wasAssociatedWith` |
//! | `written_by` | `wasAttributedTo` |
//! | `derived_from` / `summarized_from` / `observed_from` | `wasDerivedFrom` (with the write activity; `prov:type` `mw:<edge>`) and `used` by the write |
//! | `read_by` (with the three scores) | `activity` `mwa:read-<n>`; `used` (scores as attributes), `wasAssociatedWith` |
//! | `verified_by` | `activity` `mwa:verify-<n>`; `used`, `wasAssociatedWith` |
//! | `forwarded_to` | `activity` `mwa:forward-<n>`; `used`, `wasAssociatedWith` |
//! | action (with its gate decision) | `activity` `mwa:action-<id>`; `wasAssociatedWith` the agent |
//! | `used_for_action` | `used` by the action |
//! | `authorized_by` | `actedOnBehalfOf` (agent on behalf of the principal, for the action) |
//! | revocation | `activity` `mwa:revoke-<id>`; `wasInvalidatedBy` for the revoked record (`mw:cause` `revoked`) and for every `invalidated_by` descendant (`revoked_ancestor`) |
//! | erasure | `activity` `mwa:erase-<id>`; `wasInvalidatedBy` for each erased record (`mw:cause` `erased`) |

use crate::gate::ActionRecord;
use crate::graph::{ErasureRecord, LineageGraph, PrincipalState, RecordState};
use crate::model::{Edge, EdgeAttrs, NodeRef};
use memwarden_core::ids::ItemId;
use memwarden_core::item::{EdgeKind, Readers};
use memwarden_core::principal::PrincipalKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The format tag of [`AuditTrail`].
pub const AUDIT_FORMAT: &str = "memwarden-lineage-audit/1";

/// The whole audit trail in the crate's own JSON: every node and edge, gate decisions with their
/// rule, cause, supporting ids, affected ancestors and threshold, read scores on `read_by` edges,
/// erasure records. No text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditTrail {
    /// [`AUDIT_FORMAT`].
    pub format: String,
    /// Principal nodes.
    pub principals: Vec<PrincipalState>,
    /// Record nodes (tombstones included), in graph order.
    pub records: Vec<RecordState>,
    /// Action nodes with their decisions.
    pub actions: Vec<ActionRecord>,
    /// The edge log.
    pub edges: Vec<Edge>,
    /// Erasures.
    pub erasures: Vec<ErasureRecord>,
}

impl LineageGraph {
    /// The audit trail (own JSON shape).
    pub fn audit_trail(&self) -> AuditTrail {
        let mut records: Vec<RecordState> = self.records().cloned().collect();
        records.sort_by_key(RecordState::seq);
        AuditTrail {
            format: AUDIT_FORMAT.to_owned(),
            principals: self.principals().cloned().collect(),
            records,
            actions: self.actions().cloned().collect(),
            edges: self.edges().to_vec(),
            erasures: self.erasures().to_vec(),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for milliseconds since the Unix epoch (proleptic Gregorian, UTC).
pub fn iso8601_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let milli = ms % 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Civil-from-days (Howard Hinnant's algorithm), for days >= 0.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

const NS_MW: &str = "https://memwarden.invalid/ns/lineage#";
const NS_REC: &str = "https://memwarden.invalid/record/";
const NS_PRI: &str = "https://memwarden.invalid/principal/";
const NS_ACT: &str = "https://memwarden.invalid/activity/";

fn rec(id: ItemId) -> String {
    format!("mwr:{id}")
}
fn node(n: &NodeRef) -> String {
    match n {
        NodeRef::Record(id) => rec(*id),
        NodeRef::Principal(p) => format!("mwp:{p}"),
        NodeRef::Action(id) => format!("mwa:action-{id}"),
    }
}
fn typed(kind: &str) -> Value {
    json!({"$": kind, "type": "prov:QUALIFIED_NAME"})
}
fn readers_str(r: &Readers) -> String {
    match r {
        Readers::All => "all".to_owned(),
        Readers::Only(s) => s.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" "),
    }
}

/// Builds the PROV-JSON document section by section.
struct Prov {
    sections: BTreeMap<&'static str, Map<String, Value>>,
    blank: u64,
}

impl Prov {
    fn new() -> Self {
        Self { sections: BTreeMap::new(), blank: 0 }
    }
    fn put(&mut self, section: &'static str, id: String, body: Value) {
        self.sections.entry(section).or_default().insert(id, body);
    }
    fn rel(&mut self, section: &'static str, body: Value) {
        self.blank += 1;
        let id = format!("_:{section}{}", self.blank);
        self.put(section, id, body);
    }
    fn finish(self) -> Value {
        let mut doc = Map::new();
        doc.insert("prefix".to_owned(), json!({"mw": NS_MW, "mwr": NS_REC, "mwp": NS_PRI, "mwa": NS_ACT}));
        for (k, v) in self.sections {
            doc.insert(k.to_owned(), Value::Object(v));
        }
        Value::Object(doc)
    }
}

/// The audit trail as W3C PROV-JSON (a `serde_json::Value`; serialize it with `to_string`).
pub fn prov_json(trail: &AuditTrail) -> Value {
    let mut p = Prov::new();
    for pr in &trail.principals {
        let base = match pr.kind {
            PrincipalKind::User => "prov:Person",
            PrincipalKind::Agent | PrincipalKind::Tool | PrincipalKind::Source => "prov:SoftwareAgent",
        };
        let kind = crate::model::NodeKind::of_principal(pr.kind).as_str();
        p.put(
            "agent",
            format!("mwp:{}", pr.id),
            json!({"prov:type": [typed(base), typed(&format!("mw:{kind}"))], "mw:reputation": pr.reputation.get()}),
        );
    }
    let mut write_of: BTreeMap<ItemId, String> = BTreeMap::new();
    for r in &trail.records {
        let id = rec(r.id());
        let s = r.summary();
        p.put(
            "entity",
            id.clone(),
            json!({
                "prov:type": typed(&format!("mw:{}", r.kind().node_kind().as_str())),
                "mw:integrity": r.integrity().as_str(),
                "mw:visibility": match r.scope().visibility {
                    memwarden_core::item::Visibility::Private => "private",
                    memwarden_core::item::Visibility::Shared => "shared",
                    memwarden_core::item::Visibility::Revoked => "revoked",
                },
                "mw:readers": readers_str(&r.scope().readers),
                "mw:affected": r.affected(),
                "mw:poisoned": r.poisoned(),
                "mw:erased": r.erased(),
                "mw:depth": s.depth,
                "mw:minSourceTrust": s.min_source_trust.get(),
                "mw:flow": s.flow.get(),
            }),
        );
        let act = format!("mwa:write-{}", r.id());
        let t = iso8601_ms(r.created_ms());
        p.put("activity", act.clone(), json!({"prov:type": typed("mw:write"), "prov:startTime": t, "prov:endTime": t}));
        p.rel("wasGeneratedBy", json!({"prov:entity": id, "prov:activity": act, "prov:time": t}));
        write_of.insert(r.id(), act);
    }
    let mut revoke_act: BTreeMap<ItemId, String> = BTreeMap::new();
    for e in &trail.edges {
        let t = iso8601_ms(e.at_ms);
        let from = node(&e.from);
        let to = node(&e.to);
        match e.kind {
            EdgeKind::WrittenBy => {
                p.rel("wasAttributedTo", json!({"prov:entity": from, "prov:agent": to}));
                if let NodeRef::Record(id) = e.from
                    && let Some(act) = write_of.get(&id)
                {
                    p.rel("wasAssociatedWith", json!({"prov:activity": act, "prov:agent": to}));
                }
            }
            EdgeKind::DerivedFrom | EdgeKind::SummarizedFrom | EdgeKind::ObservedFrom => {
                let mut body = json!({"prov:generatedEntity": from, "prov:usedEntity": to, "prov:type": typed(&format!("mw:{}", e.kind.as_str()))});
                if let NodeRef::Record(id) = e.from
                    && let Some(act) = write_of.get(&id)
                {
                    if let Some(o) = body.as_object_mut() {
                        o.insert("prov:activity".to_owned(), json!(act));
                    }
                    p.rel("used", json!({"prov:activity": act, "prov:entity": to, "prov:time": t}));
                }
                p.rel("wasDerivedFrom", body);
            }
            EdgeKind::ReadBy | EdgeKind::VerifiedBy | EdgeKind::ForwardedTo => {
                let tag = match e.kind {
                    EdgeKind::ReadBy => "read",
                    EdgeKind::VerifiedBy => "verify",
                    _ => "forward",
                };
                let act = format!("mwa:{tag}-{}", e.seq);
                p.put(
                    "activity",
                    act.clone(),
                    json!({"prov:type": typed(&format!("mw:{tag}")), "prov:startTime": t, "prov:endTime": t}),
                );
                let mut used = json!({"prov:activity": act, "prov:entity": from, "prov:time": t});
                if let (EdgeAttrs::Read(s), Some(o)) = (e.attrs.clone(), used.as_object_mut()) {
                    o.insert("mw:semantic".to_owned(), json!(s.semantic.get()));
                    o.insert("mw:trust".to_owned(), json!(s.trust.get()));
                    o.insert("mw:final".to_owned(), json!(s.final_score.get()));
                }
                p.rel("used", used);
                p.rel("wasAssociatedWith", json!({"prov:activity": act, "prov:agent": to}));
            }
            EdgeKind::InvalidatedBy => {
                let (root, cause) = match (&e.from, &e.to) {
                    (NodeRef::Record(r), NodeRef::Principal(_)) => (*r, "revoked"),
                    (_, NodeRef::Record(r)) => (*r, "revoked_ancestor"),
                    _ => continue,
                };
                let act = revoke_act.entry(root).or_insert_with(|| format!("mwa:revoke-{root}")).clone();
                if cause == "revoked" {
                    p.put(
                        "activity",
                        act.clone(),
                        json!({"prov:type": typed("mw:revoke"), "prov:startTime": t, "prov:endTime": t}),
                    );
                    p.rel("wasAssociatedWith", json!({"prov:activity": act, "prov:agent": to}));
                }
                p.rel(
                    "wasInvalidatedBy",
                    json!({"prov:entity": from, "prov:activity": act, "prov:time": t, "mw:cause": cause}),
                );
            }
            // Not a graph edge (a session's witness, kept on the item only).
            EdgeKind::SeenInSession => {}
            EdgeKind::UsedForAction => {
                p.rel("used", json!({"prov:activity": to, "prov:entity": from, "prov:time": t}));
            }
            EdgeKind::AuthorizedBy => {
                if let NodeRef::Action(aid) = e.from
                    && let Some(a) = trail.actions.iter().find(|a| a.id == aid)
                {
                    p.rel(
                        "actedOnBehalfOf",
                        json!({"prov:delegate": format!("mwp:{}", a.agent), "prov:responsible": to, "prov:activity": from}),
                    );
                }
            }
        }
    }
    for a in &trail.actions {
        let act = format!("mwa:action-{}", a.id);
        let t = iso8601_ms(a.at_ms);
        let d = &a.decision;
        p.put(
            "activity",
            act.clone(),
            json!({
                "prov:type": typed("mw:action"),
                "prov:startTime": t,
                "prov:endTime": t,
                "mw:tool": a.tool,
                "mw:decision": d.decision.as_str(),
                "mw:finalDecision": a.final_decision.as_str(),
                "mw:rule": serde_json::to_value(d.rule).unwrap_or(Value::Null),
                "mw:cause": d.cause.map_or("none", |c| c.as_str()),
                "mw:threshold": d.threshold.get(),
                "mw:supporting": d.supporting.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "),
                "mw:affectedAncestors": d.affected.iter().map(|x| x.id.to_string()).collect::<Vec<_>>().join(" "),
            }),
        );
        p.rel("wasAssociatedWith", json!({"prov:activity": act, "prov:agent": format!("mwp:{}", a.agent)}));
    }
    for er in &trail.erasures {
        let act = format!("mwa:erase-{}", er.erasure_id);
        let t = iso8601_ms(er.at_ms);
        p.put("activity", act.clone(), json!({"prov:type": typed("mw:erase"), "prov:startTime": t, "prov:endTime": t}));
        p.rel("wasAssociatedWith", json!({"prov:activity": act, "prov:agent": format!("mwp:{}", er.requested_by)}));
        for id in &er.erased {
            p.rel(
                "wasInvalidatedBy",
                json!({"prov:entity": rec(*id), "prov:activity": act, "prov:time": t, "mw:cause": "erased"}),
            );
        }
    }
    p.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601_ms(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
