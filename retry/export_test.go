package retry

// ClaimRecoveries returns how many claims are being settled in the
// background now.
func (o *Orchestrator) ClaimRecoveries() int { return o.claimRecoveries() }
