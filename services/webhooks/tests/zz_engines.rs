//! The last words of a workspace `cargo test`: whether the PostgreSQL half of the store tests
//! ran. Cargo runs test targets by package, then kind, then name, so this target (of the last
//! package, named to sort last, without a harness, and with no doc-tests after it anywhere in
//! the workspace) prints the final line. The store tests skip PostgreSQL, with a note that the
//! test harness hides, when `TEST_DATABASE_URL` is not set; `scripts/test` always sets it, and
//! with `SWITCHBOARD_REQUIRE_POSTGRES=1` a missing one fails them instead.

fn main() {
    if std::env::var_os("TEST_DATABASE_URL").is_none() {
        println!(
            "NOTE: PostgreSQL was NOT tested: TEST_DATABASE_URL is not set, so the store tests ran on \
             SQLite only (scripts/test runs both engines)."
        );
    }
}
