//! The service's two gRPC faces: `IdentityService` (teams, keys, credits, the agency tree:
//! what every request's authentication and the other services need) and `AccountService`
//! (people: signing in, sessions, members, invitations, second factors, SSO). Both unpack
//! requests, call the store and map its errors; neither holds state of its own.

pub mod accounts;
pub mod identity;
