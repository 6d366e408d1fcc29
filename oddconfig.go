package h2file

import (
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// warnOddConfig logs a warning for each setting that file_server accepts,
// and so h2_file_server accepts too with the same effect, but that is
// unlikely to be what the user meant.
func (h *Handler) warnOddConfig(logger *zap.Logger) {
	if status := h.StatusCode.String(); status != "" && !strings.Contains(status, "{") {
		code, err := strconv.Atoi(status)
		switch {
		case err != nil:
			logger.Warn("status_code is not a number or a placeholder: every file would be answered with 500 Internal Server Error instead, as file_server does",
				zap.String("status_code", status))
		case code == 0:
			// no override, as when it is not set
		case code < 0:
			logger.Warn("status_code is negative: it is ignored, as file_server ignores it",
				zap.Int("status_code", code))
		case code < 100 || code > 999:
			logger.Warn("status_code is not a three-digit HTTP status: every file response would be aborted, as file_server's is",
				zap.Int("status_code", code))
		case code < 200 && code != 101:
			logger.Warn("status_code is informational (1xx): it is sent ahead of each file's usual response, as file_server sends it",
				zap.Int("status_code", code))
		}
	}
	if h.Browse != nil && h.Browse.FileLimit < 0 {
		logger.Warn("browse file_limit is negative: directory listings show every entry, without a limit, as file_server's do",
			zap.Int("file_limit", h.Browse.FileLimit))
	}
	seen := make(map[string]bool, len(h.PrecompressedOrder))
	for _, format := range h.PrecompressedOrder {
		if seen[format] {
			logger.Warn("precompressed_order lists an encoding more than once: only its first place counts, as with file_server",
				zap.String("encoding", format), zap.Strings("precompressed_order", h.PrecompressedOrder))
			break
		}
		seen[format] = true
	}
}
