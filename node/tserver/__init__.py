"""node/tserver"""
