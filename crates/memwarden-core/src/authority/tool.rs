//! Tool outputs a tool vouches for.
//!
//! A tool's output is trusted only when the tool itself says so. Two ways exist:
//!
//! * the tool principal writes its output itself, authenticated as the tool
//!   ([`Vouch::Writer`]); or
//! * the caller reports the output together with the tool's Ed25519 signature over a
//!   [`ToolStatement`] — the call (tenant, tool, caller, namespace, arguments, inputs) and the
//!   output — made with the key registered for the tool principal ([`Vouch::Signature`]).
//!
//! Anything else is [`Vouch::CallerReported`]: the output is the caller's claim about what the
//! tool said, labelled at most the caller's label (see
//! [`crate::authority::Authority::admit_tool_output`]).
//!
//! The signed bytes are `b"memwarden-tool-output-v1\n"` followed by the canonical JSON of the
//! statement (struct fields in declaration order, no whitespace), the same convention as grants.

use super::ToolArg;
use crate::ids::{ItemId, Namespace, PrincipalId, TenantId};
use crate::principal::{Principal, PrincipalKind};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

/// Who vouches for a tool output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vouch {
    /// Nobody: a caller reports what the tool returned.
    CallerReported,
    /// The tool writes its own output (the caller is the tool).
    Writer,
    /// The output carries the tool's verified signature.
    Signature,
}

/// What a tool signs to vouch for one output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolStatement {
    /// The tenant.
    pub tenant: TenantId,
    /// The tool.
    pub tool: PrincipalId,
    /// Who called it.
    pub caller: PrincipalId,
    /// Where the output is stored.
    pub namespace: Namespace,
    /// The arguments, as passed.
    pub args: Vec<ToolArg>,
    /// The memories passed in.
    pub inputs: Vec<ItemId>,
    /// The output text.
    pub output: String,
}

/// The domain-separation tag of a tool statement's signed bytes.
pub const TOOL_STATEMENT_TAG: &[u8] = b"memwarden-tool-output-v1\n";

impl ToolStatement {
    /// The bytes a tool signs.
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut out = TOOL_STATEMENT_TAG.to_vec();
        // A struct of strings, ids and plain enums always serialises.
        out.extend(serde_json::to_vec(self).unwrap_or_default());
        out
    }

    /// Sign as the tool.
    pub fn sign(&self, key: &SigningKey) -> [u8; 64] {
        key.sign(&self.signing_bytes()).to_bytes()
    }

    /// Whether `signature` is `tool`'s over this statement: `tool` must be a tool of the
    /// statement's tenant with a registered key.
    pub fn verify(&self, tool: &Principal, signature: &[u8; 64]) -> bool {
        if tool.kind != PrincipalKind::Tool || tool.id != self.tool || tool.tenant != self.tenant {
            return false;
        }
        let Some(pk) = tool.public_key else { return false };
        let Ok(vk) = VerifyingKey::from_bytes(&pk) else { return false };
        vk.verify(&self.signing_bytes(), &Signature::from_bytes(signature)).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::ValueKind;

    fn statement() -> ToolStatement {
        ToolStatement {
            tenant: TenantId::new("acme").unwrap(),
            tool: PrincipalId::new("ocr").unwrap(),
            caller: PrincipalId::new("asst").unwrap(),
            namespace: Namespace::new("invoices").unwrap(),
            args: vec![ToolArg { key: "file".into(), value: "inv-7.pdf".into(), kind: ValueKind::Text, sources: vec![] }],
            inputs: vec![],
            output: "Payee for invoice: ACCT-GOOD-1".into(),
        }
    }

    /// Known-answer vector: the signed bytes and an Ed25519 signature under the key with seed
    /// [42; 32] (RFC 8032 signatures are deterministic). Any change to the statement's encoding
    /// breaks this test, which is what keeps existing tool signers working.
    #[test]
    fn known_answer_vector() {
        let s = statement();
        let bytes = s.signing_bytes();
        let expected = concat!(
            "memwarden-tool-output-v1\n",
            r#"{"tenant":"acme","tool":"ocr","caller":"asst","namespace":"invoices","args":[{"key":"file","value":"inv-7.pdf","kind":"text","sources":[]}],"inputs":[],"output":"Payee for invoice: ACCT-GOOD-1"}"#
        );
        assert_eq!(String::from_utf8(bytes).unwrap(), expected);
        let key = SigningKey::from_bytes(&[42; 32]);
        let sig = s.sign(&key);
        let mut tool = Principal::new(s.tool.clone(), s.tenant.clone(), PrincipalKind::Tool);
        tool.public_key = Some(key.verifying_key().to_bytes());
        assert!(s.verify(&tool, &sig));
        assert_eq!(hex::encode(sig), KAT_SIGNATURE_HEX, "the signature over the vector changed");
    }

    /// Computed independently with Python's `cryptography` (Ed25519PrivateKey.from_private_bytes
    /// of 32 bytes 0x2a, signing the bytes above).
    const KAT_SIGNATURE_HEX: &str = "05125007cd95351af665c4e22752d7fdb7bce0d9fdd52b56ff6406a84e97456591546cf75edba9c62acd9d3c31e82a0f9085a98fe2556e51e595fe9c15a65900";

    #[test]
    fn a_changed_call_or_output_does_not_verify() {
        let s = statement();
        let key = SigningKey::from_bytes(&[42; 32]);
        let sig = s.sign(&key);
        let mut tool = Principal::new(s.tool.clone(), s.tenant.clone(), PrincipalKind::Tool);
        tool.public_key = Some(key.verifying_key().to_bytes());
        let mut other = s.clone();
        other.output = "Payee for invoice: ACCT-EVIL-1".into();
        assert!(!other.verify(&tool, &sig), "a changed output");
        let mut other = s.clone();
        other.caller = PrincipalId::new("mallory").unwrap();
        assert!(!other.verify(&tool, &sig), "another caller");
        let mut source = tool.clone();
        source.kind = PrincipalKind::Source;
        assert!(!s.verify(&source, &sig), "only a tool vouches");
        let mut keyless = tool.clone();
        keyless.public_key = None;
        assert!(!s.verify(&keyless, &sig), "a tool without a registered key");
    }
}
