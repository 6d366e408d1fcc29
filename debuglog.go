package h2file

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The handler's debug logs, with file_server's messages, out of line so
// that ServeHTTP's stack frame stays small (see reserveStack).

// logPathJoin logs the result of the sanitising join at debug level.
//
//go:noinline
func (h *Handler) logPathJoin(root, fsName, requestPath, filename string) {
	if c := h.logger.Check(zapcore.DebugLevel, "sanitized path join"); c != nil {
		c.Write(
			zap.String("site_root", root),
			zap.String("fs", fsName),
			zap.String("request_path", requestPath),
			zap.String("result", filename),
		)
	}
}

// logHidden logs at debug level that filename is hidden.
//
//go:noinline
func (h *Handler) logHidden(msg, filename string, filesToHide []string) {
	if c := h.logger.Check(zapcore.DebugLevel, msg); c != nil {
		c.Write(zap.String("filename", filename), zap.Strings("files_to_hide", filesToHide))
	}
}

// logFile logs msg with a filename at debug level.
//
//go:noinline
func (h *Handler) logFile(msg, filename string) {
	if c := h.logger.Check(zapcore.DebugLevel, msg); c != nil {
		c.Write(zap.String("filename", filename))
	}
}
