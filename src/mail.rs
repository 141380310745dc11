//! Outgoing mail over SMTP with lettre (rustls). Off when no host is configured.

use std::time::Duration;

use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::config::{SmtpConfig, SmtpSecurity};

/// Why a mail was not sent; the text is safe to show an admin.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// No SMTP host is configured.
    #[error("mail is off: no SMTP server is configured")]
    Off,
    /// The message could not be built (e.g. a bad address).
    #[error("the mail could not be built: {0}")]
    Build(String),
    /// The server refused or could not be reached.
    #[error("the mail server did not accept the mail: {0}")]
    Send(String),
}

/// A mail to send: both a plain-text and an HTML body.
pub struct Mail {
    /// Recipient address.
    pub to: String,
    /// Subject line.
    pub subject: String,
    /// Plain-text body.
    pub text: String,
    /// HTML body (already escaped by its template).
    pub html: String,
}

/// The configured mail transport, if any.
#[derive(Clone)]
pub struct Mailer {
    transport: Option<AsyncSmtpTransport<Tokio1Executor>>,
    from: Option<Mailbox>,
}

impl Mailer {
    /// Builds the transport from the settings; an empty host means mail is off.
    pub fn from_config(cfg: &SmtpConfig) -> Result<Mailer, MailError> {
        if cfg.host.is_empty() {
            return Ok(Mailer { transport: None, from: None });
        }
        let from: Mailbox = cfg.from.parse().map_err(|e| MailError::Build(format!("smtp.from: {e}")))?;
        let builder = match cfg.security {
            SmtpSecurity::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&cfg.host),
            SmtpSecurity::Starttls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&cfg.host),
            SmtpSecurity::None => {
                Ok(AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(cfg.host.clone()))
            }
        }
        .map_err(|e| MailError::Build(e.to_string()))?;
        let mut builder = builder.port(cfg.port).timeout(Some(Duration::from_secs(cfg.timeout_secs)));
        if !cfg.username.is_empty() {
            builder = builder.credentials(Credentials::new(cfg.username.clone(), cfg.password.clone()));
        }
        Ok(Mailer { transport: Some(builder.build()), from: Some(from) })
    }

    /// Whether mail can be sent at all.
    pub fn is_on(&self) -> bool {
        self.transport.is_some()
    }

    /// Sends one mail and waits for the server's answer.
    pub async fn send(&self, mail: Mail) -> Result<(), MailError> {
        let (Some(transport), Some(from)) = (&self.transport, &self.from) else {
            return Err(MailError::Off);
        };
        let to: Mailbox = mail.to.parse().map_err(|e| MailError::Build(format!("recipient: {e}")))?;
        let message = Message::builder()
            .message_id(None)
            .from(from.clone())
            .to(to)
            .subject(mail.subject)
            .multipart(MultiPart::alternative_plain_html(mail.text, mail.html))
            .map_err(|e| MailError::Build(e.to_string()))?;
        transport.send(message).await.map(|_| ()).map_err(|e| MailError::Send(e.to_string()))
    }
}
