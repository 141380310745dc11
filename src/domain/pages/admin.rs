//! Admin console pages that show what the console and the teams know together: a provider with
//! the people and groups allowed to use it, and the quotas with whom they apply to.

use std::collections::HashMap;

use uuid::Uuid;

use super::Pages;
use crate::domain::DomainResult;
use crate::domain::admin::ProviderView;
use crate::domain::admin::model_overrides::{ModelFacts, model_facts};
use crate::domain::admin::quotas::Quotas;
use crate::domain::authz::Admin;

/// `/admin/providers/{id}`: a provider, with its allow-lists as names.
pub struct ProviderPage {
    /// The provider.
    pub provider: ProviderView,
    /// Emails of the people allowed to use it (accounts since deleted are left out).
    pub allowed_emails: Vec<String>,
    /// Names of the groups allowed to use it.
    pub allowed_groups: Vec<String>,
    /// Its models and where each fact about them comes from.
    pub model_facts: Vec<ModelFacts>,
}

/// `/admin/quotas`: every quota, with the emails and group names they apply to.
pub struct QuotasPage {
    /// The default and every person's and group's own quota.
    pub quotas: Quotas,
    /// Emails of the people with their own quota.
    pub emails: HashMap<Uuid, String>,
    /// Names of every group.
    pub group_names: HashMap<Uuid, String>,
}

impl Pages {
    /// A provider's page.
    pub async fn admin_provider(&self, admin: &Admin, id: Uuid) -> DomainResult<ProviderPage> {
        let provider = self.admin.get_provider(admin, id).await?;
        let emails = self.admin.user_emails(admin, &provider.allowed_users).await?;
        let allowed_emails = provider.allowed_users.iter().filter_map(|id| emails.get(id).cloned()).collect();
        let names = self.teams.groups.names_by_id(admin).await?;
        let allowed_groups = provider.allowed_groups.iter().filter_map(|id| names.get(id).cloned()).collect();
        let model_facts = model_facts(self.engine.providers(), &provider);
        Ok(ProviderPage { provider, allowed_emails, allowed_groups, model_facts })
    }

    /// The quotas page.
    pub async fn admin_quotas(&self, admin: &Admin) -> DomainResult<QuotasPage> {
        let quotas = self.admin.quotas(admin).await?;
        let ids: Vec<Uuid> = quotas.people.iter().map(|(id, _)| *id).collect();
        let emails = self.admin.user_emails(admin, &ids).await?;
        let group_names = self.teams.groups.names_by_id(admin).await?;
        Ok(QuotasPage { quotas, emails, group_names })
    }
}
