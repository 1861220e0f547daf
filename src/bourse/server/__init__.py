"""The coordinator: REST API, agent hub, scheduler and the database behind them."""
