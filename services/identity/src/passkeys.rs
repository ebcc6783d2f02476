//! Passkeys (WebAuthn, with `webauthn-rs`): registered by a signed-in person, used as the
//! second factor of a sign-in that passed the password, or alone, without a password (a
//! discoverable credential names its user). User verification is required every time, so a
//! passkey is two factors in one.
//!
//! The relying party is the platform's public URL: its host is the RP ID and the URL the one
//! origin accepted. A loopback IP address, which browsers do not take as an RP ID, is
//! `localhost` (a development machine reaches the portal there). Each ceremony's state is kept
//! here (`store::passkeys`), used once, for five minutes: nothing a browser sends back is
//! trusted as state.

use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};
use switchboard_proto::v1::{
    FinishPasskeyRequest, PasskeyCeremony, PasskeyCeremonyRequest, PasskeyInfo, RemovePasskeyRequest, SecondFactors,
    SignedIn, User,
};
use webauthn_rs::prelude::{
    DiscoverableAuthentication, Passkey, PasskeyAuthentication, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential, Url, Uuid, Webauthn, WebauthnBuilder,
};

use crate::grpc::accounts::{AccountsApi, user_actor};
use crate::store::passkeys::{REAUTH, REGISTER, SECOND_FACTOR, SIGN_IN};

/// Names a person gives a passkey: at most this long.
const MAX_NAME: usize = 60;

fn refused(message: &str) -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, message.to_owned())
}

fn internal(error: impl std::fmt::Display) -> ServiceError {
    ServiceError::internal(anyhow::anyhow!("{error}"))
}

/// The relying party of `origin` (the public URL, scheme and host).
fn relying_party(origin: &str) -> ServiceResult<Webauthn> {
    let mut url = Url::parse(origin).map_err(|_| ServiceError::invalid_field("origin", "is not a URL"))?;
    let loopback = url.host_str().is_some_and(|host| matches!(host, "127.0.0.1" | "[::1]" | "::1"));
    if loopback {
        url.set_host(Some("localhost")).map_err(internal)?;
    }
    let rp_id = url.host_str().ok_or_else(|| ServiceError::invalid_field("origin", "has no host"))?.to_owned();
    WebauthnBuilder::new(&rp_id, &url).and_then(|builder| builder.rp_name("Switchboard").build()).map_err(internal)
}

fn user_uuid(user: &User) -> ServiceResult<Uuid> {
    Uuid::parse_str(&user.id).map_err(internal)
}

fn to_json(value: &impl serde::Serialize) -> ServiceResult<String> {
    serde_json::to_string(value).map_err(internal)
}

fn from_json<T: serde::de::DeserializeOwned>(field: &str, text: &str) -> ServiceResult<T> {
    serde_json::from_str(text).map_err(|_| ServiceError::invalid_field(field, "is not a WebAuthn credential"))
}

/// A passkey's credential id as stored: lower-case hex.
fn credential_key(passkey: &Passkey) -> String {
    hex::encode(passkey.cred_id().as_slice())
}

impl AccountsApi {
    /// The signed-in person's passkeys, each with its stored row id.
    async fn passkeys_of(&self, user_id: &str) -> ServiceResult<Vec<(String, Passkey)>> {
        let stored = self.store.passkeys_of(user_id).await?;
        stored.into_iter().map(|row| Ok((row.id, serde_json::from_str(&row.passkey).map_err(internal)?))).collect()
    }

    pub(crate) async fn begin_passkey_registration(
        &self,
        request: PasskeyCeremonyRequest,
    ) -> ServiceResult<PasskeyCeremony> {
        let user = self.user_of_session(&request.token_hash).await?;
        let webauthn = relying_party(&request.origin)?;
        let known: Vec<_> = self.passkeys_of(&user.id).await?.iter().map(|(_, key)| key.cred_id().clone()).collect();
        let name = format!("{} {}", user.first_name, user.last_name);
        let (options, state) = webauthn
            .start_passkey_registration(user_uuid(&user)?, &user.email, name.trim(), Some(known))
            .map_err(internal)?;
        let id = self.store.begin_ceremony(REGISTER, Some(&user.id), None, &to_json(&state)?).await?;
        Ok(PasskeyCeremony { id, options: to_json(&options)? })
    }

    pub(crate) async fn finish_passkey_registration(
        &self,
        request: FinishPasskeyRequest,
    ) -> ServiceResult<PasskeyInfo> {
        let user = self.user_of_session(&request.token_hash).await?;
        let name = request.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME {
            return Err(ServiceError::invalid_field("name", format!("must be 1 to {MAX_NAME} characters")));
        }
        let ceremony = self.store.take_ceremony(REGISTER, &request.ceremony).await?;
        if ceremony.user_id.as_deref() != Some(user.id.as_str()) {
            return Err(refused("This passkey request belongs to another session"));
        }
        let state: PasskeyRegistration = serde_json::from_str(&ceremony.state).map_err(internal)?;
        let credential: RegisterPublicKeyCredential = from_json("credential", &request.credential)?;
        let passkey = relying_party(&request.origin)?
            .finish_passkey_registration(&credential, &state)
            .map_err(|error| ServiceError::invalid_field("credential", format!("was not accepted: {error}")))?;
        let info = self.store.add_passkey(&user.id, &credential_key(&passkey), &to_json(&passkey)?, name).await?;
        self.audit(
            &user.team_id,
            AuditAction::AuthPasskeyAdded,
            user_actor(&user),
            &user.email,
            request.client.as_ref(),
        )
        .await;
        // Other sessions end (one opened before this factor, or stolen, does not outlive it); this
        // one, if it was limited to setting up a second factor, is a whole one now.
        self.store.end_other_sessions(&user.id, &request.token_hash).await?;
        self.sessions_changed(&user.team_id).await;
        Ok(info)
    }

    pub(crate) async fn remove_passkey(&self, request: RemovePasskeyRequest) -> ServiceResult<SecondFactors> {
        let user = self.user_of_session(&request.token_hash).await?;
        self.store.remove_passkey(&user.id, &user.team_id, &request.passkey_id).await?;
        self.audit(
            &user.team_id,
            AuditAction::AuthPasskeyRemoved,
            user_actor(&user),
            &user.email,
            request.client.as_ref(),
        )
        .await;
        self.store.end_other_sessions(&user.id, &request.token_hash).await?;
        self.sessions_changed(&user.team_id).await;
        self.store.second_factors(&user).await
    }

    pub(crate) async fn begin_passkey_second_factor(
        &self,
        request: PasskeyCeremonyRequest,
    ) -> ServiceResult<PasskeyCeremony> {
        let challenge = self.store.peek_challenge(&request.challenge).await?;
        self.begin_passkey_assertion(SECOND_FACTOR, &challenge.user, Some(&challenge.id), &request.origin).await
    }

    /// The options of a passkey proof by a signed-in person (`Reauthenticate`).
    pub(crate) async fn begin_passkey_reauthentication(
        &self,
        request: PasskeyCeremonyRequest,
    ) -> ServiceResult<PasskeyCeremony> {
        let user = self.user_of_session(&request.token_hash).await?;
        self.begin_passkey_assertion(REAUTH, &user, None, &request.origin).await
    }

    /// A ceremony of `kind` in which `user` answers with one of their passkeys (for the pending
    /// sign-in `challenge_id`, when there is one).
    async fn begin_passkey_assertion(
        &self,
        kind: &str,
        user: &User,
        challenge_id: Option<&str>,
        origin: &str,
    ) -> ServiceResult<PasskeyCeremony> {
        let keys: Vec<Passkey> = self.passkeys_of(&user.id).await?.into_iter().map(|(_, key)| key).collect();
        if keys.is_empty() {
            return Err(ServiceError::conflict("This person has no passkey"));
        }
        let (options, state) = relying_party(origin)?.start_passkey_authentication(&keys).map_err(internal)?;
        let id = self.store.begin_ceremony(kind, Some(&user.id), challenge_id, &to_json(&state)?).await?;
        Ok(PasskeyCeremony { id, options: to_json(&options)? })
    }

    /// Whether the passkey assertion of a second-factor ceremony is the user's, for the
    /// pending sign-in `challenge_id`.
    pub(crate) async fn passkey_second_factor(
        &self,
        user: &User,
        challenge_id: &str,
        assertion: (&str, &str, &str),
    ) -> ServiceResult<bool> {
        self.passkey_assertion(SECOND_FACTOR, user, Some(challenge_id), assertion).await
    }

    /// Whether the assertion answering a ceremony of `kind` is one of `user`'s passkeys (for
    /// the pending sign-in `challenge_id`, when the ceremony belongs to one); the credential is
    /// stored again with its new counter.
    pub(crate) async fn passkey_assertion(
        &self,
        kind: &str,
        user: &User,
        challenge_id: Option<&str>,
        (ceremony, credential, origin): (&str, &str, &str),
    ) -> ServiceResult<bool> {
        let ceremony = self.store.take_ceremony(kind, ceremony).await?;
        if ceremony.user_id.as_deref() != Some(user.id.as_str()) || ceremony.challenge_id.as_deref() != challenge_id {
            return Ok(false);
        }
        let state: PasskeyAuthentication = serde_json::from_str(&ceremony.state).map_err(internal)?;
        let credential: PublicKeyCredential = from_json("passkey", credential)?;
        let Ok(result) = relying_party(origin)?.finish_passkey_authentication(&credential, &state) else {
            return Ok(false);
        };
        for (id, mut key) in self.passkeys_of(&user.id).await? {
            if key.update_credential(&result).is_some() {
                self.store.passkey_used(&id, &to_json(&key)?).await?;
            }
        }
        Ok(true)
    }

    pub(crate) async fn begin_passkey_sign_in(
        &self,
        request: PasskeyCeremonyRequest,
    ) -> ServiceResult<PasskeyCeremony> {
        let (options, state) = relying_party(&request.origin)?.start_discoverable_authentication().map_err(internal)?;
        let id = self.store.begin_ceremony(SIGN_IN, None, None, &to_json(&state)?).await?;
        Ok(PasskeyCeremony { id, options: to_json(&options)? })
    }

    pub(crate) async fn finish_passkey_sign_in(&self, request: FinishPasskeyRequest) -> ServiceResult<SignedIn> {
        let ceremony = self.store.take_ceremony(SIGN_IN, &request.ceremony).await?;
        let state: DiscoverableAuthentication = serde_json::from_str(&ceremony.state).map_err(internal)?;
        let credential: PublicKeyCredential = from_json("credential", &request.credential)?;
        let webauthn = relying_party(&request.origin)?;
        let unknown = || refused("This passkey is not one of a person's here");
        let (user_handle, credential_id) =
            webauthn.identify_discoverable_authentication(&credential).map_err(|_| unknown())?;
        let user = self.store.user(&user_handle.to_string()).await.map_err(|_| unknown())?;
        let keys = self.passkeys_of(&user.id).await?;
        let (id, mut key) =
            keys.into_iter().find(|(_, key)| key.cred_id().as_slice() == credential_id).ok_or_else(unknown)?;
        let result = webauthn
            .finish_discoverable_authentication_v2(&credential, state, &key)
            .map_err(|_| refused("The passkey's answer could not be verified"))?;
        if key.update_credential(&result).is_some() {
            self.store.passkey_used(&id, &to_json(&key)?).await?;
        }
        let client = request.client.unwrap_or_default();
        let signed_in = self.store.begin_passkey_session(&user, &client, self.settings.sessions).await?;
        self.audit_signed_in(AuditAction::AuthSignedInPasskey, &signed_in, Some(&client)).await;
        Ok(signed_in)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_address_is_localhost_to_webauthn() {
        assert!(relying_party("http://127.0.0.1:8080").is_ok());
        assert!(relying_party("https://switchboard.example.com").is_ok());
        assert!(relying_party("not a url").is_err());
    }
}
