"""node/log"""
