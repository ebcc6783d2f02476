//! E-mail for the links people need (invitations, password resets) when the platform has an
//! SMTP server (`SWITCHBOARD_SMTP_URL`): `smtp://host:port` (plain, for a relay on the
//! operator's network), `smtp://host:587?tls=required` (STARTTLS) or `smtps://host:465`, with
//! `user:password@` when the server wants them; the sender is `SWITCHBOARD_SMTP_FROM`. Without
//! it the link is only shown to whoever made it. Mail goes after the answer: a slow or failing
//! server never fails the request (it is logged).

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

const DEFAULT_FROM: &str = "Switchboard <no-reply@localhost>";

#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

/// What is sent.
pub struct Mail {
    pub to: String,
    pub subject: String,
    pub body: String,
}

impl Mailer {
    /// The mailer of `SWITCHBOARD_SMTP_URL`, if set.
    pub fn from_env() -> anyhow::Result<Option<Self>> {
        let Some(url) = std::env::var("SWITCHBOARD_SMTP_URL").ok().filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url.trim())
            .map_err(|e| anyhow::anyhow!("SWITCHBOARD_SMTP_URL: {e}"))?
            .timeout(Some(std::time::Duration::from_secs(10)))
            .build();
        let from = std::env::var("SWITCHBOARD_SMTP_FROM").unwrap_or_else(|_| DEFAULT_FROM.to_owned());
        let from = from.parse().map_err(|e| anyhow::anyhow!("SWITCHBOARD_SMTP_FROM={from}: {e}"))?;
        Ok(Some(Self { transport, from }))
    }

    pub async fn send(&self, mail: Mail) -> anyhow::Result<()> {
        let to: Mailbox = mail.to.parse().map_err(|e| anyhow::anyhow!("the address {}: {e}", mail.to))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(mail.subject)
            .header(ContentType::TEXT_PLAIN)
            .body(mail.body)
            .map_err(|e| anyhow::anyhow!("building the message: {e}"))?;
        self.transport.send(message).await.map_err(|e| anyhow::anyhow!("sending: {e}"))?;
        Ok(())
    }

    /// Sends in the background; a failure is logged.
    pub fn send_later(&self, mail: Mail) {
        let mailer = self.clone();
        tokio::spawn(async move {
            let to = mail.to.clone();
            match mailer.send(mail).await {
                Ok(()) => tracing::info!(%to, "mail sent"),
                Err(error) => tracing::warn!(%to, error = format!("{error:#}"), "mail not sent"),
            }
        });
    }
}

/// The invitation of `email` into `team`.
pub fn invitation(email: &str, team: &str, url: &str) -> Mail {
    Mail {
        to: email.to_owned(),
        subject: format!("You are invited to {team} on Switchboard"),
        body: format!(
            "You have been invited to join {team} on Switchboard.\n\nOpen this link to choose your name and \
             password (it works once, for 7 days):\n\n{url}\n\nIf you did not expect this, ignore this message.\n"
        ),
    }
}

/// A password-reset link.
pub fn reset(email: &str, url: &str) -> Mail {
    Mail {
        to: email.to_owned(),
        subject: "Reset your Switchboard password".to_owned(),
        body: format!(
            "Open this link to choose a new password (it works once, for 1 day):\n\n{url}\n\nIf you did not ask \
             for this, ignore this message: your password stays as it is.\n"
        ),
    }
}

/// The link that confirms `email` as a person's new address; sent to that address.
pub fn email_change(email: &str, url: &str) -> Mail {
    Mail {
        to: email.to_owned(),
        subject: "Confirm your new Switchboard e-mail address".to_owned(),
        body: format!(
            "Open this link to use this address to sign in to Switchboard (it works once, for 1 day):\n\n{url}\n\n\
             Until then your address stays as it is. If you did not ask for this, ignore this message.\n"
        ),
    }
}

/// The notice to an address that someone asked to move their account to, when another account
/// uses it already: nothing changed, and the requester was told nothing of it.
pub fn email_in_use(email: &str) -> Mail {
    Mail {
        to: email.to_owned(),
        subject: "Someone asked to use this address on Switchboard".to_owned(),
        body: format!(
            "Someone signed in to Switchboard asked to use {email} as the address of their account. An account \
             uses this address already, so nothing changed.\n\nIf that was you, sign in with this address instead. \
             If not, you need do nothing.\n"
        ),
    }
}

/// The notice to a person's former address that it no longer signs in.
pub fn email_changed(old_email: &str, new_email: &str) -> Mail {
    Mail {
        to: old_email.to_owned(),
        subject: "Your Switchboard e-mail address was changed".to_owned(),
        body: format!(
            "The address you sign in to Switchboard with is now {new_email}; this one ({old_email}) no longer \
             signs in.\n\nIf you did not make this change, ask an owner of your team or reset your password at \
             once.\n"
        ),
    }
}
