package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// dataLossStore is the part of *redisstore.Store that sees and acknowledges
// a loss of Redis data (docs/DESIGN.md, "The record and its lifecycle", Store amnesia).
type dataLossStore interface {
	NotifyDataLoss(func(error))
	DataLoss() redisstore.DataLoss
	AcknowledgeDataLoss(context.Context) (redisstore.Acknowledgement, error)
}

const dataLostBanner = `
************************************************************************
*  STORE DATA LOST: Redis lost data under this gateway (restarted      *
*  empty, a failover to an empty replica, a FLUSHALL). Every call is    *
*  refused with store_data_lost until an operator acknowledges:        *
*  refserver store acknowledge-data-loss                               *
************************************************************************
`

// watchDataLoss says loudly, on stderr and in the log, when the store sees
// a loss of data (or starts while the fleet's marker records one).
func (s *server) watchDataLoss(st dataLossStore, stderr io.Writer) {
	s.metrics.setDataLost(func() bool { return st.DataLoss().Lost })
	st.NotifyDataLoss(func(err error) {
		fmt.Fprint(stderr, dataLostBanner)
		s.log.Error("store data lost: calls are refused with store_data_lost until an operator acknowledges "+
			"(POST /v1/store/acknowledge-data-loss)", "error", s.redact.String(err.Error()))
	})
}

// dataLossWarning is what an acknowledgement logs and answers.
const dataLossWarning = "calls whose records were lost can be dispatched again; vendors with a binding " +
	"(header, body_pointer) deduplicate them only if the deployment id is unchanged (deployment_id in the config)"

// ackView is the answer of POST /v1/store/acknowledge-data-loss.
type ackView struct {
	// Acknowledged: a loss was recorded and is acknowledged now; false
	// when none was (nothing changed).
	Acknowledged bool `json:"acknowledged"`
	// Lost says what was seen (which sentinel vanished).
	Lost      string `json:"lost,omitempty"`
	Sentinels int    `json:"sentinels"`
	Message   string `json:"message"`
}

// handleAcknowledgeDataLoss is an operator's acknowledgement that Redis lost
// data: every gateway of the fleet claims again at its next reading.
func (s *server) handleAcknowledgeDataLoss(w http.ResponseWriter, r *http.Request) {
	by, ok := s.approverName(r)
	if !ok {
		s.restRefuse(w, errNotApprover)
		return
	}
	st, ok := s.store.(dataLossStore)
	if !ok {
		s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: "this store does not watch for lost data"})
		return
	}
	ack, err := st.AcknowledgeDataLoss(r.Context())
	switch {
	case errors.Is(err, redisstore.ErrInvalidOptions):
		s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: "the store's data-loss check is off"})
		return
	case err != nil:
		rf := s.classify(err)
		if rf.reason == "store_unavailable" {
			s.metrics.storeErrors.WithLabelValues("acknowledge").Inc()
		}
		s.log.Warn("data loss not acknowledged", "by", by, "error", rf.logText())
		s.restRefuse(w, rf)
		return
	case !ack.Acknowledged:
		s.log.Info("data loss acknowledgement: no loss is recorded", "by", by)
		writeJSON(w, http.StatusOK, ackView{Sentinels: ack.Sentinels, Message: "no loss of data is recorded; nothing changed"})
		return
	}
	s.log.Warn("store data loss acknowledged: the fleet claims again; "+dataLossWarning, "by", by, "lost", ack.Detail)
	writeJSON(w, http.StatusOK, ackView{Acknowledged: true, Lost: ack.Detail, Sentinels: ack.Sentinels,
		Message: "acknowledged: every gateway claims again at its next reading of the store; " + dataLossWarning})
}
