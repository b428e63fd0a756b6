package agent

import "roam/internal/agent/config"

// Config is roamd's config file (package config).
type Config = config.Config
