//! Per-key rate limiting (token buckets).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

struct Bucket {
    tokens: f64,
    last: Instant,
}

/// One token bucket per key id: `rate` tokens per second, at most `burst` stored.
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").field("rate", &self.rate).field("burst", &self.burst).finish()
    }
}

impl RateLimiter {
    /// A limiter; `rate == 0` disables it.
    pub fn new(rate: f64, burst: u32) -> Self {
        Self { rate, burst: f64::from(burst.max(1)), buckets: Mutex::new(HashMap::new()) }
    }

    /// Take one token for `key`. `Err(seconds)` tells how long until one is available.
    pub fn check(&self, key: &str) -> Result<(), u64> {
        self.check_at(key, Instant::now())
    }

    fn check_at(&self, key: &str, now: Instant) -> Result<(), u64> {
        if self.rate <= 0.0 {
            return Ok(());
        }
        let Ok(mut map) = self.buckets.lock() else { return Ok(()) };
        let b = map.entry(key.to_owned()).or_insert(Bucket { tokens: self.burst, last: now });
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * self.rate).min(self.burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - b.tokens) / self.rate;
            Err(wait.ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bucket_empties_and_refills() {
        let l = RateLimiter::new(2.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(l.check_at("k", t0).is_ok());
        }
        assert!(l.check_at("k", t0).is_err());
        assert!(l.check_at("other", t0).is_ok());
        assert!(l.check_at("k", t0 + Duration::from_millis(600)).is_ok());
        assert!(RateLimiter::new(0.0, 1).check("k").is_ok());
    }
}
