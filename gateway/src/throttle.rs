//! Failed password checks (sign-in, and the current password of a password change), counted in
//! 15-minute windows that begin with the first failure:
//!
//! - per e-mail address **and** client address: 10. A guesser at one account is held up; its
//!   owner, signing in from anywhere else, is not (NIST SP 800-63B 5.2.2: a lockout anyone who
//!   knows an address can set off is a denial of service).
//! - per e-mail address: 100, a ceiling for guessers who spread over many addresses. Past it, a
//!   client that has failed for this address already waits; one that has not gets its try.
//! - per client address: 50, over every e-mail it tries.
//!
//! A check **reserves** a failure before the password is looked at (every counter is taken in
//! one atomic step, and given back at once when one is over its limit): so N concurrent wrong
//! passwords get exactly as many 401s as the limit allows, never N. A check that then
//! succeeds gives its reservation back. The counts live in Redis when there is one, so every
//! gateway replica sees the same; without Redis (or while it does not answer) each process
//! counts its own.
//!
//! A reservation is a member of a set, named by a token of its own, not an increment: a
//! reservation whose answer came too late (Redis counted as away, the script still ran) or
//! whose give-back failed is given back again, by name, until Redis answers. With increments,
//! every slow moment of Redis left a failure behind for each correct sign-in, and ten of them
//! locked the person out for the window (`scripts/kube test` found it).
//!
//! Requests for a password-reset e-mail are counted the same way, each request a "failure",
//! under their own [`Policy`]: a mailbox is not flooded, and no one is refused a sign-in by them.
//! Their per-address ceiling holds for every client: a sender who changes client address gets
//! no more mails into one mailbox (the sign-in ceiling lets a client without failures through,
//! so that a guesser cannot lock an owner out; a mail cap has no owner to lock out).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use switchboard_kit::redis_client::RedisClient;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};

pub const WINDOW_MS: i64 = 15 * 60 * 1000;
pub const PER_EMAIL_AND_CLIENT: i64 = 10;
pub const PER_EMAIL: i64 = 100;
pub const PER_CLIENT: i64 = 50;

/// KEYS: the counters of e-mail and client, e-mail, client. ARGV: the window (ms), the three
/// limits, 1 when the e-mail's limit holds for clients without failures too, and the
/// reservation's token. Adds the token to each; when one is over its limit takes it out again.
/// Answers the wait (ms) before a try is allowed again, 0 when this one is.
const RESERVE: &str = r"
local taken = {}
for i = 1, 3 do
  redis.call('ZADD', KEYS[i], 0, ARGV[6])
  taken[i] = redis.call('ZCARD', KEYS[i])
  if taken[i] == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
  end
end
local over = {taken[1] > tonumber(ARGV[2]), taken[2] > tonumber(ARGV[3]) and (taken[1] > 1 or ARGV[5] == '1'),
  taken[3] > tonumber(ARGV[4])}
local wait = 0
for i = 1, 3 do
  if over[i] then
    local left = redis.call('PTTL', KEYS[i])
    if left > wait then wait = left end
  end
end
if wait > 0 then
  for i = 1, 3 do redis.call('ZREM', KEYS[i], ARGV[6]) end
end
return wait
";

/// KEYS: the three counters; ARGV: the token. Gives a reservation back (a check that
/// succeeded); a token that is not there (its reservation never ran) changes nothing.
const RELEASE: &str = r"
for i = 1, 3 do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 0
";

/// How often, and how many times, a give-back that Redis did not take is sent again: past
/// that, the reservation ends with its window.
const RELEASE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
const RELEASE_ATTEMPTS: u32 = 60;

/// What one throttle counts: its counters' names, its limits and what it answers past them.
pub struct Policy {
    name: &'static str,
    per_pair: i64,
    per_email: i64,
    per_client: i64,
    /// Past `per_email`, every client waits, not only those that failed for the address.
    strict_email: bool,
    message: &'static str,
    hint: &'static str,
}

/// Failed password checks.
pub const SIGN_IN: Policy = Policy {
    name: "signin",
    per_pair: PER_EMAIL_AND_CLIENT,
    per_email: PER_EMAIL,
    per_client: PER_CLIENT,
    strict_email: false,
    message: "Too many failed sign-ins; try again later",
    hint: "After 10 failures for an e-mail address from one client (100 from all clients, 50 from one client for \
           any address) in 15 minutes, tries wait.",
};

/// Requests for a password-reset e-mail (`POST /v1/auth/forgot`).
pub const RESET_REQUESTS: Policy = Policy {
    name: "forgot",
    per_pair: 3,
    per_email: 5,
    per_client: 20,
    strict_email: true,
    message: "Too many password-reset requests; try again later",
    hint: "An e-mail address gets at most 3 reset e-mails a client in 15 minutes (5 in all); a client asks for at \
           most 20.",
};

/// Requests to change one's e-mail address (`POST /v1/me/email`), each of which mails a link to
/// an address the caller chose, counted per new address. (A wrong password there counts under
/// [`SIGN_IN`] too.)
pub const EMAIL_CHANGES: Policy = Policy {
    name: "email-change",
    per_pair: 3,
    per_email: 5,
    per_client: 20,
    strict_email: true,
    message: "Too many e-mail change requests; try again later",
    hint: "An address gets at most 3 confirmation e-mails a client in 15 minutes (5 in all); a client asks for at \
           most 20.",
};

pub struct SignInThrottle {
    policy: &'static Policy,
    redis: Option<Arc<RedisClient>>,
    reserve: redis::Script,
    release: redis::Script,
    /// By counter key: failures and when the window ends (ms).
    local: Mutex<HashMap<String, (i64, i64)>>,
}

/// A failure reserved for a password check: kept if the check fails, given back with
/// [`SignInThrottle::succeeded`] if it does not.
#[must_use]
pub struct Reservation {
    keys: [String; 3],
    /// Its name in Redis's sets.
    token: String,
    /// Where it was taken: the local counts, when Redis did not answer.
    local: bool,
    /// Whether Redis may hold it: it answered, or it was asked and did not answer in time.
    in_redis: bool,
}

fn keys(policy: &Policy, email: &str, address: &str) -> [String; 3] {
    use sha2::Digest;
    // Hashed: e-mail and client addresses are not kept in Redis in the clear.
    let hash = |text: &str| hex::encode(&sha2::Sha256::digest(text.as_bytes())[..16]);
    let email = email.trim().to_lowercase();
    [
        // `v2`: sets of reservations; the counters of before were plain integers.
        format!("switchboard:{}:v2:pair:{}", policy.name, hash(&format!("{email}\n{address}"))),
        format!("switchboard:{}:v2:email:{}", policy.name, hash(&email)),
        format!("switchboard:{}:v2:addr:{}", policy.name, hash(address)),
    ]
}

/// One give-back of a reservation to Redis; whether Redis took it.
async fn release_once(redis: &RedisClient, script: &redis::Script, keys: &[String; 3], token: &str) -> bool {
    let mut invocation = script.prepare_invoke();
    invocation.key(&keys[0]).key(&keys[1]).key(&keys[2]).arg(token);
    redis.run::<i64>(&invocation).await.is_some()
}

fn throttled(policy: &Policy, wait_ms: i64) -> ServiceError {
    let mut error = ServiceError::new(ErrorKind::RateLimited, policy.message).with_hint(policy.hint);
    error.retry_at_ms = Some(now_ms() + wait_ms);
    error
}

impl SignInThrottle {
    /// Failed sign-ins ([`SIGN_IN`]).
    pub fn new(redis: Option<Arc<RedisClient>>) -> Self {
        Self::with_policy(&SIGN_IN, redis)
    }

    pub fn with_policy(policy: &'static Policy, redis: Option<Arc<RedisClient>>) -> Self {
        Self {
            policy,
            redis,
            reserve: redis::Script::new(RESERVE),
            release: redis::Script::new(RELEASE),
            local: Mutex::new(HashMap::new()),
        }
    }

    /// Reserves a failure for a password check of `email` from `address`, or answers 429 with
    /// the wait when one of the limits is spent.
    pub async fn reserve(&self, email: &str, address: &str) -> ServiceResult<Reservation> {
        let policy = self.policy;
        let keys = keys(policy, email, address);
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut in_redis = false;
        if let Some(redis) = &self.redis {
            // Skipped, Redis is not asked at all; asked, the script may run even if its answer
            // comes too late.
            in_redis = !redis.skipping();
            let mut invocation = self.reserve.prepare_invoke();
            invocation.key(&keys[0]).key(&keys[1]).key(&keys[2]);
            invocation.arg(WINDOW_MS).arg(policy.per_pair).arg(policy.per_email).arg(policy.per_client);
            invocation.arg(i64::from(policy.strict_email)).arg(&token);
            if let Some(wait_ms) = redis.run::<i64>(&invocation).await {
                return if wait_ms > 0 {
                    Err(throttled(policy, wait_ms))
                } else {
                    Ok(Reservation { keys, token, local: false, in_redis: true })
                };
            }
        }
        let wait_ms = self.reserve_locally(&keys);
        if wait_ms > 0 {
            // Refused here: a reservation Redis may have taken all the same is given back.
            if in_redis {
                self.release_in_redis(keys, token).await;
            }
            Err(throttled(policy, wait_ms))
        } else {
            Ok(Reservation { keys, token, local: true, in_redis })
        }
    }

    /// The check succeeded (or did not get to the password): its reservation is given back.
    pub async fn succeeded(&self, reservation: Reservation) {
        let Reservation { keys, token, local, in_redis } = reservation;
        if local {
            let mut counts = self.local.lock().unwrap_or_else(|e| e.into_inner());
            for key in &keys {
                if let Some(entry) = counts.get_mut(key) {
                    entry.0 = (entry.0 - 1).max(0);
                }
            }
        }
        if in_redis {
            self.release_in_redis(keys, token).await;
        }
    }

    /// Takes a reservation out of Redis's sets; when Redis does not answer, again every
    /// RELEASE_RETRY in a task of its own, up to RELEASE_ATTEMPTS times.
    async fn release_in_redis(&self, keys: [String; 3], token: String) {
        let Some(redis) = self.redis.clone() else { return };
        let script = self.release.clone();
        if release_once(&redis, &script, &keys, &token).await {
            return;
        }
        tokio::spawn(async move {
            for _ in 0..RELEASE_ATTEMPTS {
                tokio::time::sleep(RELEASE_RETRY).await;
                if release_once(&redis, &script, &keys, &token).await {
                    return;
                }
            }
            tracing::warn!("a sign-in throttle reservation was not given back to Redis; it ends with its window");
        });
    }

    /// As the script does, under the lock: the wait (ms), 0 when reserved.
    fn reserve_locally(&self, keys: &[String; 3]) -> i64 {
        let now = now_ms();
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        if local.len() > 100_000 {
            local.retain(|_, (_, ends)| *ends > now);
        }
        let mut taken = [(0, 0); 3];
        for (slot, key) in taken.iter_mut().zip(keys) {
            let entry = local.entry(key.clone()).or_insert((0, now + WINDOW_MS));
            if entry.1 <= now {
                *entry = (0, now + WINDOW_MS);
            }
            entry.0 += 1;
            *slot = (entry.0, entry.1 - now);
        }
        let policy = self.policy;
        let over = [
            taken[0].0 > policy.per_pair,
            taken[1].0 > policy.per_email && (taken[0].0 > 1 || policy.strict_email),
            taken[2].0 > policy.per_client,
        ];
        let wait = over.iter().zip(&taken).filter(|(over, _)| **over).map(|(_, (_, left))| *left).max().unwrap_or(0);
        if wait > 0 {
            for key in keys {
                if let Some(entry) = local.get_mut(key) {
                    entry.0 -= 1;
                }
            }
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_eleventh_failure_from_one_client_waits_and_other_clients_do_not() {
        let throttle = SignInThrottle::new(None);
        for _ in 0..PER_EMAIL_AND_CLIENT {
            let _kept = throttle.reserve("Ada@example.com", "10.0.0.1").await.expect("not yet");
        }
        let refused = throttle.reserve("ada@EXAMPLE.com", "10.0.0.1").await.err().expect("throttled");
        assert_eq!(refused.kind, ErrorKind::RateLimited);
        assert!(refused.retry_at_ms.is_some_and(|at| at > now_ms()));
        // The owner, from elsewhere, is not locked out; another address from this client is not either.
        let elsewhere = throttle.reserve("ada@example.com", "10.0.0.2").await.expect("another client");
        throttle.succeeded(elsewhere).await;
        let other = throttle.reserve("grace@example.com", "10.0.0.1").await.expect("another address");
        throttle.succeeded(other).await;
    }

    /// A redis-server of this test's own on a free port, killed when dropped.
    struct Server(std::process::Child, u16);

    impl Server {
        fn start() -> Server {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let child = std::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server (the test command installs it)");
            // Killed and waited for when dropped, the panic below included.
            let server = Server(child, port);
            for _ in 0..100 {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return server;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            panic!("redis-server did not listen on {port} within 5 s");
        }

        fn cli(&self, args: &[&str]) -> String {
            let output = std::process::Command::new("redis-cli")
                .args(["-p", &self.1.to_string()])
                .args(args)
                .output()
                .expect("redis-cli");
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Redis late at every sign-in of a person who types the right password: each time the
    /// reservation's script runs after the gateway stopped waiting for it. The reservations are
    /// given back all the same, and the person is not refused once Redis is quick again (with
    /// counters, each left a failure behind, and the eleventh sign-in was refused).
    #[tokio::test]
    async fn reservations_whose_answers_came_late_are_given_back() {
        let server = Server::start();
        let redis =
            RedisClient::connect(&format!("redis://127.0.0.1:{}/", server.1), Duration::from_millis(50), "test")
                .unwrap();
        let throttle = SignInThrottle::new(Some(redis));
        // Once with Redis quick: its scripts are loaded, as in a gateway that has run a while
        // (a script Redis does not know yet would not run late, it would be refused).
        let first = throttle.reserve("ada@example.com", "10.0.0.1").await.expect("the first");
        assert!(!first.local, "Redis answered the first");
        throttle.succeeded(first).await;
        for attempt in 0..=PER_EMAIL_AND_CLIENT {
            // Every command waits 200 ms: the throttle gives up on Redis after 50.
            server.cli(&["CLIENT", "PAUSE", "200", "ALL"]);
            let reservation = throttle.reserve("ada@example.com", "10.0.0.1").await.expect("counted locally");
            assert!(reservation.local, "attempt {attempt}: Redis was late");
            throttle.succeeded(reservation).await;
            // Redis is skipped for a second after it was late; then asked again.
            tokio::time::sleep(Duration::from_millis(1300)).await;
        }
        let quick = throttle.reserve("ada@example.com", "10.0.0.1").await.expect("not locked out");
        assert!(!quick.local, "Redis answered this one");
        throttle.succeeded(quick).await;
        let pair = &keys(&SIGN_IN, "ada@example.com", "10.0.0.1")[0];
        assert_eq!(server.cli(&["ZCARD", pair]), "0", "every reservation given back");
    }

    /// Through Redis as through the local counts: a burst of wrong passwords for one address
    /// from one client gets exactly the limit, and the owner elsewhere still gets in.
    #[tokio::test]
    async fn a_burst_through_redis_gets_exactly_the_limit() {
        let server = Server::start();
        let url = format!("redis://127.0.0.1:{}/", server.1);
        // A generous deadline: the burst is to be counted in Redis, none of it locally.
        let redis = RedisClient::connect(&url, Duration::from_secs(2), "test").unwrap();
        let throttle = Arc::new(SignInThrottle::new(Some(redis)));
        let tries = (0..30).map(|_| {
            let throttle = throttle.clone();
            tokio::spawn(async move { throttle.reserve("ada@example.com", "10.0.0.1").await })
        });
        let mut kept = Vec::new();
        let mut refused = 0;
        for attempt in futures::future::join_all(tries).await {
            match attempt.expect("the task ran") {
                Ok(reservation) => kept.push(reservation),
                Err(error) => {
                    assert_eq!(error.kind, ErrorKind::RateLimited);
                    refused += 1;
                }
            }
        }
        assert_eq!((kept.len(), refused), (PER_EMAIL_AND_CLIENT as usize, 20));
        assert!(kept.iter().all(|reservation| !reservation.local), "every one counted in Redis");
        let pair = &keys(&SIGN_IN, "ada@example.com", "10.0.0.1")[0];
        assert_eq!(server.cli(&["ZCARD", pair]), PER_EMAIL_AND_CLIENT.to_string(), "the refused ones taken out");
        let owner = throttle.reserve("ada@example.com", "10.0.0.2").await.expect("the owner, from elsewhere");
        throttle.succeeded(owner).await;
    }

    #[tokio::test]
    async fn reset_requests_are_counted_apart_from_sign_ins() {
        let resets = SignInThrottle::with_policy(&RESET_REQUESTS, None);
        for _ in 0..RESET_REQUESTS.per_pair {
            let _kept = resets.reserve("ada@example.com", "10.0.0.1").await.expect("not yet");
        }
        let refused = resets.reserve("ada@example.com", "10.0.0.1").await.err().expect("the fourth waits");
        assert!(refused.message.contains("password-reset"), "{}", refused.message);
        let sign_ins = SignInThrottle::new(None);
        let _kept = sign_ins.reserve("ada@example.com", "10.0.0.1").await.expect("sign-ins count apart");
    }

    #[tokio::test]
    async fn a_success_gives_its_reservation_back() {
        let throttle = SignInThrottle::new(None);
        for _ in 0..PER_EMAIL_AND_CLIENT * 3 {
            let reserved = throttle.reserve("ada@example.com", "10.0.0.1").await.expect("successes count nothing");
            throttle.succeeded(reserved).await;
        }
    }

    #[tokio::test]
    async fn past_the_address_ceiling_only_clients_that_failed_already_wait() {
        let throttle = SignInThrottle::new(None);
        for client in 0..PER_EMAIL {
            let _kept = throttle.reserve("ada@example.com", &format!("10.1.{}.{}", client / 200, client % 200)).await;
        }
        let _kept = throttle.reserve("ada@example.com", "10.2.0.1").await.expect("a client's first try passes");
        assert!(throttle.reserve("ada@example.com", "10.2.0.1").await.is_err(), "its second waits");
    }

    /// Eight client addresses asking 3 times each get the address 5 mails, not one more: a
    /// sender cannot pass a mailbox's cap by changing address (issue 53, finding 8).
    #[tokio::test]
    async fn a_mail_cap_holds_for_every_client_of_the_address() {
        for policy in [&RESET_REQUESTS, &EMAIL_CHANGES] {
            let throttle = SignInThrottle::with_policy(policy, None);
            let mut passed = 0;
            for client in 0..8 {
                for _ in 0..3 {
                    if throttle.reserve("ada@example.com", &format!("10.3.0.{client}")).await.is_ok() {
                        passed += 1;
                    }
                }
            }
            assert_eq!(passed, policy.per_email, "{}", policy.name);
        }
    }

    #[tokio::test]
    async fn one_client_waits_after_fifty_failures_over_any_addresses() {
        let throttle = SignInThrottle::new(None);
        for n in 0..PER_CLIENT {
            let _kept = throttle.reserve(&format!("user{n}@example.com"), "10.0.0.9").await.expect("not yet");
        }
        assert!(throttle.reserve("new@example.com", "10.0.0.9").await.is_err());
    }
}
