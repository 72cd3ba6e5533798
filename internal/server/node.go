package server

import "net/http"

func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	node := s.src.Node()
	node.APIVersion, node.Kind = "v1", "Node"
	s.writeJSON(w, r, node)
}

func (s *Server) eviction(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, s.src.Eviction())
}

func (s *Server) statsSummary(w http.ResponseWriter, r *http.Request) {
	summary, err := s.src.StatsSummary()
	if err != nil {
		http.Error(w, "measuring the node: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	s.writeJSON(w, r, summary)
}
