-- An audit entry's action is one of switchboard_kit::vocabulary::AuditAction (issue 54); the
-- identity store refuses any other before it writes, and this keeps the table to the same
-- list (a test compares the two). NOT VALID: rows written before are not read again.
-- A release that adds an action replaces the constraint in a migration of its own.
ALTER TABLE audit_log ADD CONSTRAINT audit_log_action_known CHECK (action IN (
    'user.name_changed', 'user.email_change_requested', 'user.email_change_failed',
    'user.email_changed', 'auth.signed_in', 'auth.sign_in_failed', 'auth.signed_out',
    'auth.signed_up', 'auth.password_changed', 'auth.password_change_failed', 'auth.session_ended',
    'auth.signed_out_elsewhere', 'auth.password_reset_requested', 'auth.password_reset',
    'auth.second_factor_enabled', 'auth.second_factor_removed', 'auth.second_factor_failed',
    'auth.recovery_code_used', 'auth.recovery_codes_renewed', 'auth.signed_in_sso',
    'auth.sso_linked', 'auth.passkey_added', 'auth.passkey_removed', 'auth.signed_in_passkey',
    'auth.reauthenticated', 'auth.reauthentication_failed', 'api_key.created', 'api_key.revoked',
    'member.invited', 'member.invitation_revoked', 'member.joined', 'member.role_changed',
    'member.removed', 'subteam.created', 'subteam.updated', 'subteam.deleted',
    'subteam.credits_added', 'webhook.created', 'webhook.deleted', 'instructions.replaced',
    'instructions.restored', 'team.security_changed', 'team.sso_changed',
    'team.sso_domain_verified', 'team.sso_removed'
)) NOT VALID;
