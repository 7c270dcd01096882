"""node/client"""
