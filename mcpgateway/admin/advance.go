package admin

import (
	"errors"
	"net/http"

	"github.com/obol-gateway/obol/idempotency"
)

// advance runs one step of the scope version advance
// ([idempotency.ScopeAdvancer]): 200 while closing (run it again after
// retry_after_ms) and once advanced; 409 records_live with the count to
// strand, conflict when the key holds something else, migrating while a
// Cluster slot moves.
func (h *handler) advance(w http.ResponseWriter, r *http.Request) {
	adv, by, ok := part[idempotency.ScopeAdvancer](h, w, r, true,
		refuse("not_implemented", http.StatusNotImplemented, "the store cannot advance the scope version"))
	if !ok {
		return
	}
	var req AdvanceRequest
	if !h.body(w, r, &req, `{"to": N, "strand": N} (both optional)`, true) {
		return
	}
	ar := idempotency.AdvanceRequest{To: idempotency.ScopeVersion + 1, Strand: -1}
	if req.To != nil {
		ar.To = *req.To
	}
	if req.Strand != nil {
		if *req.Strand < 0 {
			h.refuse(w, refuse("invalid_request", http.StatusBadRequest, "strand must not be negative"))
			return
		}
		ar.Strand = *req.Strand
	}
	if ar.To <= idempotency.ScopeVersion {
		h.refuse(w, refuse("invalid_request", http.StatusBadRequest, "to must be above this gateway's scope version"))
		return
	}
	a, err := adv.AdvanceScope(r.Context(), ar)
	if err != nil {
		rf := h.storeRefusal("advance", err)
		if errors.Is(err, idempotency.ErrStoreUnavailable) || rf.Reason == "store_unavailable" {
			if rf.Reason != "store_unavailable" {
				h.cfg.OnStoreError("advance")
			}
			rf = refusal{Error: Error{Reason: "store_unavailable", Status: http.StatusServiceUnavailable,
				Message: "store_unavailable: the advance could not finish; run it again"}, detail: h.cfg.Redact(err.Error())}
		}
		h.refuse(w, rf)
		return
	}
	v := Advance{Phase: string(a.Phase), From: a.From, To: a.To, Live: a.Live, Counts: []Count{}, RetryAfterMS: a.RetryAfterMS}
	for _, c := range a.Counts {
		v.Counts = append(v.Counts, Count{c.Version, string(c.State), c.Records})
	}
	status := http.StatusOK
	switch a.Phase {
	case idempotency.AdvanceRecordsLive:
		status, v.Reason, v.Message = http.StatusConflict, "records_live",
			"live records of the old version remain; finish when none do, or strand exactly this count"
	case idempotency.AdvanceConflict:
		status, v.Reason, v.Message = http.StatusConflict, "conflict",
			"the fleet's scope version key holds "+a.Fleet+", not this gateway's version or its closing mark"
	case idempotency.AdvanceMigrating:
		status, v.Reason, v.Message = http.StatusConflict, "migrating",
			"a Cluster slot is migrating ("+a.Fleet+"): a count now could miss records; run it again once resharding is done"
	case idempotency.AdvanceClosing:
		v.Message = "the old version is closing: its gateways stop claiming within a lease; run the advance again after retry_after_ms"
	}
	if status != http.StatusOK {
		v.Status = status
		h.cfg.OnRefusal(v.Reason)
	}
	h.cfg.Logger.Info("scope version advance", "phase", v.Phase, "from", a.From, "to", a.To, "live", a.Live, "by", by)
	writeJSON(w, status, v)
}
