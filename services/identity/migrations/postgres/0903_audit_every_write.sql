-- Every write of a team's data is audited (issue 55): the entry names its target as the
-- portal shows it and the fields the write set (names only, never values), and the list of
-- actions grows by the agents', knowledge's, conversations', CRM's and webhooks' writes.
ALTER TABLE audit_log ADD COLUMN target_name TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_log ADD COLUMN changes TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_log DROP CONSTRAINT audit_log_action_known;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_action_known CHECK (action IN (
    'user.name_changed', 'user.email_change_requested', 'user.email_change_failed',
    'user.email_changed', 'auth.signed_in', 'auth.sign_in_failed', 'auth.signed_out',
    'auth.signed_up', 'auth.password_changed', 'auth.password_change_failed',
    'auth.session_ended', 'auth.signed_out_elsewhere', 'auth.password_reset_requested',
    'auth.password_reset', 'auth.second_factor_enabled', 'auth.second_factor_removed',
    'auth.second_factor_failed', 'auth.recovery_code_used', 'auth.recovery_codes_renewed',
    'auth.signed_in_sso', 'auth.sso_linked', 'auth.passkey_added', 'auth.passkey_removed',
    'auth.signed_in_passkey', 'auth.reauthenticated', 'auth.reauthentication_failed',
    'api_key.created', 'api_key.revoked', 'member.invited', 'member.invitation_revoked',
    'member.joined', 'member.role_changed', 'member.removed', 'subteam.created',
    'subteam.updated', 'subteam.deleted', 'subteam.credits_added', 'webhook.created',
    'webhook.deleted', 'instructions.replaced', 'instructions.restored', 'team.security_changed',
    'team.sso_changed', 'team.sso_domain_verified', 'team.sso_removed', 'agent.created',
    'agent.updated', 'agent.deleted', 'knowledgebase.created', 'knowledgebase.updated',
    'knowledgebase.deleted', 'webpage.created', 'webpage.updated', 'webpage.deleted',
    'webpage.refreshed', 'document.uploaded', 'document.updated', 'document.deleted',
    'reference.created', 'reference.imported', 'reference.updated', 'reference.deleted',
    'call.updated', 'call.deleted', 'chat.deleted', 'contact.created', 'contact.imported',
    'contact.updated', 'contact.deleted', 'contact.assignments_changed',
    'contact.boards_changed', 'contact.note_added', 'contact.note_deleted',
    'custom_field.created', 'custom_field.updated', 'custom_field.deleted', 'board.created',
    'board.updated', 'board.deleted', 'tag.created', 'tag.updated', 'tag.deleted',
    'webhook.updated', 'webhook.delivery_retried', 'webhook.tested', 'credits.alert_changed'
)) NOT VALID;
