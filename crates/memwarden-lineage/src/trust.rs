//! [`Trust`]: a number in `[0, 1]` that cannot be NaN, out of range or infinite.
//!
//! Every trust factor, every path-trust value and every gate threshold in this crate is a
//! `Trust`, so "rho within [0, 1]" is a property of the type, not a convention.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;

/// Why a number was refused as a [`Trust`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum TrustError {
    /// NaN.
    #[error("trust is NaN")]
    NaN,
    /// Below 0 or above 1 (or infinite).
    #[error("trust {0} is outside [0, 1]")]
    OutOfRange(f64),
}

/// A value in `[0, 1]`, never NaN. Totally ordered.
#[derive(Clone, Copy, PartialEq)]
pub struct Trust(f64);

impl Trust {
    /// 0: no trust.
    pub const ZERO: Trust = Trust(0.0);
    /// 1: full trust (the neutral factor of a product).
    pub const ONE: Trust = Trust(1.0);

    /// Validate a value.
    pub fn new(x: f64) -> Result<Trust, TrustError> {
        if x.is_nan() {
            Err(TrustError::NaN)
        } else if !(0.0..=1.0).contains(&x) {
            Err(TrustError::OutOfRange(x))
        } else {
            // Normalise -0.0 so equality and serialization are canonical.
            Ok(Trust(if x == 0.0 { 0.0 } else { x }))
        }
    }

    /// `clip01`: clamp into `[0, 1]`; NaN becomes 0 (an error in a trust computation denies).
    pub fn clip01(x: f64) -> Trust {
        if x.is_nan() || x <= 0.0 {
            Trust::ZERO
        } else if x >= 1.0 {
            Trust::ONE
        } else {
            Trust(x)
        }
    }

    /// A compile-time constant; values outside `[0, 1]` (or NaN) become 0.
    pub const fn lit(x: f64) -> Trust {
        if x >= 0.0 && x <= 1.0 { Trust(x) } else { Trust(0.0) }
    }

    /// The value.
    pub const fn get(self) -> f64 {
        self.0
    }

    /// Product; the result stays in `[0, 1]`.
    #[must_use]
    pub fn times(self, other: Trust) -> Trust {
        let out = Trust::clip01(self.0 * other.0);
        debug_assert!(out <= self && out <= other, "a product of trusts never exceeds a factor");
        out
    }

    /// The smaller of the two.
    #[must_use]
    pub fn min(self, other: Trust) -> Trust {
        if other < self { other } else { self }
    }

    /// The larger of the two.
    #[must_use]
    pub fn max(self, other: Trust) -> Trust {
        if other > self { other } else { self }
    }
}

impl Eq for Trust {}

impl PartialOrd for Trust {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Trust {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl fmt::Debug for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Trust({})", self.0)
    }
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.4}", self.0)
    }
}

impl Default for Trust {
    fn default() -> Self {
        Trust::ZERO
    }
}

impl TryFrom<f64> for Trust {
    type Error = TrustError;
    fn try_from(x: f64) -> Result<Self, Self::Error> {
        Trust::new(x)
    }
}

impl From<Trust> for f64 {
    fn from(t: Trust) -> f64 {
        t.0
    }
}

impl Serialize for Trust {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Trust {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let x = f64::deserialize(d)?;
        Trust::new(x).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_validated_and_clipped() {
        assert!(Trust::new(f64::NAN).is_err());
        assert!(Trust::new(-0.1).is_err());
        assert!(Trust::new(1.000_001).is_err());
        assert!(Trust::new(f64::INFINITY).is_err());
        assert_eq!(Trust::new(-0.0).unwrap().get().to_bits(), 0.0f64.to_bits());
        assert_eq!(Trust::clip01(f64::NAN), Trust::ZERO);
        assert_eq!(Trust::clip01(7.0), Trust::ONE);
        assert_eq!(Trust::clip01(-7.0), Trust::ZERO);
        assert_eq!(Trust::lit(2.0), Trust::ZERO);
        let a = Trust::new(0.5).unwrap();
        let b = Trust::new(0.25).unwrap();
        assert_eq!(a.times(b).get(), 0.125);
        assert_eq!(a.min(b), b);
        assert_eq!(a.max(b), a);
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Trust>(&json).unwrap(), a);
        assert!(serde_json::from_str::<Trust>("1.5").is_err());
    }
}
